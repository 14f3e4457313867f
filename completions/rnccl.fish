# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_rnccl_global_optspecs
    string join \n config= h/help V/version
end

function __fish_rnccl_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_rnccl_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_rnccl_using_subcommand
    set -l cmd (__fish_rnccl_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c rnccl -n "__fish_rnccl_needs_command" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_needs_command" -s h -l help -d 'Print help'
complete -c rnccl -n "__fish_rnccl_needs_command" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "bench" -d 'Run and time collectives (nccl-tests\' flags and output); all_reduce by default'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "check" -d 'Check hosts\' health: each host alone, pairs, rails; a busbw matrix, outliers flagged'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "env-explain" -d 'Explain the NCCL_* settings in effect, or any knob'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "plot" -d 'Draw saved results (rnccl\'s or nccl-tests\' JSON or text output) as curves against size'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "topo" -d 'Show this host\'s (or a topology file\'s) GPUs, NICs, PCI tree and paths'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "rings" -d 'Show the rings and trees NCCL would build, and the tuning model'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "status" -d 'Ask a running job (any host) how far each rank got, what it waits on, who is behind'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "ibcheck" -d 'Check this host\'s InfiniBand/RoCE adapters, ports, GIDs, counters and placement; test RDMA bandwidth'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "top" -d 'Watch the rnccl jobs on this host live: per-rank, channel and peer traffic, stuck links'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "tune" -d 'Tune NCCL knobs interactively: sweep with them, compare busbw curves, save the best'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "man" -d 'Write the man pages (one per command) into a folder'
complete -c rnccl -n "__fish_rnccl_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s b -l minbytes -d 'Smallest size in bytes (K, M, G suffixes)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s e -l maxbytes -d 'Largest size in bytes (K, M, G suffixes)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s f -l stepfactor -d 'Multiply the size by this between points [default: 2, unless -i is given]' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s i -l stepbytes -d 'Add this many bytes between points (used when -f is not above 1)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s n -l iters -d 'Timed iterations per point' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s w -l warmup_iters -d 'Warm-up iterations per point' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s c -l check -d 'Check iterations per point (0 disables the check: #wrong prints N/A). GPU ranks check on the device' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s o -l op -d 'Reduction: sum, prod, max, min, avg, mulsum, or all' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s d -l datatype -d 'Data type: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2 (FP8), or all' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s r -l root -d 'Root rank for broadcast, reduce, gather, scatter, or all' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s m -l agg_iters -d 'Operations per iteration, launched as one group' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s a -l average -d 'Combine per-rank times: 0 rank 0, 1 mean, 2 min, 3 max' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s T -l timeout -d 'Timeout in seconds for every blocking wait (default RNCCL_TIMEOUT, 300)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s J -l output_file -d 'Also write the results as JSON to this file' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s R -l local_register -d 'Buffer registration, as nccl-tests\' -R: 0 none; 1 ncclCommRegister (GPU ranks: where every rank registered its buffers and runs in its own process or thread, all-reduce, reduce-scatter and all-gather load and store the peers\' buffers in place); 2 symmetric windows (GPU ranks: the symmetric kernels load and store the peers\' buffers in place; CPU ranks: mem_alloc + window_register, so ranks on one host read each other\'s buffers directly)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -l ranks -d 'Number of local ranks: processes x -t x -g [default: the GPUs of this host, or the CPU cores (at least 2) for CPU ranks, rounded down to whole processes]. Not allowed under a launcher, which says how many processes there are' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s t -l nthreads -d 'Threads per process (nccl-tests\' -t), each driving -g ranks' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s g -l ngpus -d 'GPUs per thread (nccl-tests\' -g): one thread drives N GPU ranks, launching their operations as one group. Needs GPUs' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s G -l cudagraph -d 'CUDA graph launches (nccl-tests\' -G): capture the timed iterations into a CUDA graph and launch it N times; 0 launches them directly. Needs GPUs' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -l bind -d 'Pin each local thread of ranks to its own equal share of the CPUs when there are at least as many CPUs (`core`, as `mpirun --bind-to core --map-by slot:PE=n`; the threads it starts share its CPUs), or leave placement to the scheduler (`none`)' -r -f -a "core\t'An equal, disjoint share of the CPUs per local thread of ranks'
none\t'The scheduler decides'"
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -l format -d 'Output format on stdout' -r -f -a "text\t'nccl-tests\' table'
json\t'The same data as one JSON document'"
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -l plot -d 'Also draw busbw and time against size, out-of-place and in-place, into this image: FILE.svg or FILE.png' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -l plot-size -d 'Size of the --plot image in pixels' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -l threads -d 'Run every local rank in this process: --ranks / -g threads of -g ranks each, instead of one process per -t x -g ranks'
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -l cpu -d 'Run CPU ranks on host buffers even on a host with GPUs'
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rnccl -n "__fish_rnccl_using_subcommand bench" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l hosts -d 'Hosts to check, comma-separated; Slurm hostlist expressions work (gpu[01-08,11])' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l hostfile -d 'File naming the hosts, one per line (# comments; "host slots=N" and "host:N" lines work)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l rsh -d 'How to start a program on a host: a command template with {host}; the worker\'s command is appended' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l rnccl -d 'The rnccl executable on the hosts [default: this executable\'s path]' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l rails -d 'NICs to measure pairs on: auto (one rail per NIC where hosts have several), none (the interface NCCL picks), or interface names (eth0,eth1)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l ranks-per-host -d 'Ranks per host, host-list mode [default: one per GPU, or 2 CPU ranks]' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -s b -l size -d 'all_reduce sizes per rank, comma-separated (K, M, G suffixes); the largest is judged' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -s n -l iters -d 'Timed iterations per size' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -s w -l warmup -d 'Warm-up iterations per size' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -s c -l check -d 'Data-check iterations per size (0: off)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -s T -l timeout -d 'Seconds one measurement (a host alone, or a pair) may take; past it, it is stopped and flagged' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l connect-timeout -d 'Seconds a host may take to start its worker (ssh included)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l below-median -d 'Flag results below this fraction of their kind\'s median busbw (0: off)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l min-busbw -d 'Flag pairs below this busbw, GB/s' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l min-host-busbw -d 'Flag hosts alone below this busbw, GB/s' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l format -d 'Output format on standard output' -r -f -a "text\t'The bandwidth matrix and the findings'
json\t'The whole report as one JSON document'"
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -s J -l output-file -d 'Also write the JSON report to this file' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l pairwise -d 'Also measure every pair of hosts (n(n-1)/2 pairs, in n-1 rounds of disjoint pairs)'
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l pairwise-quick -d 'Also measure one pair per host (host i with host i+n/2: one round)'
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l cpu -d 'CPU ranks on host memory even on hosts with GPUs'
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -l worker -d 'Internal: run as a worker of a coordinating `rnccl check`, which starts it on each host'
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rnccl -n "__fish_rnccl_using_subcommand check" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_using_subcommand env-explain" -l subsystem -d 'Only knobs of this subsystem (repeatable)' -r -f -a "alloc\t''
bootstrap\t''
collnet\t''
config\t''
debug\t''
env\t''
gin\t''
graph\t''
ib\t''
init\t''
launch\t''
mnnvl\t''
net\t''
nvls\t''
p2p\t''
plugin\t''
proto\t''
proxy\t''
ras\t''
reg\t''
rma\t''
shm\t''
socket\t''
symmetric\t''
tuning\t''
nccl-tests\t''
rnccl\t''"
complete -c rnccl -n "__fish_rnccl_using_subcommand env-explain" -l category -d 'Only knobs of this category (repeatable)' -r -f -a "system\t''
tuning\t''
debug\t''
dangerous\t''"
complete -c rnccl -n "__fish_rnccl_using_subcommand env-explain" -l format -d 'Output format' -r -f -a "table\t'Text for an 80-column terminal'
json\t'JSON'
yaml\t'YAML'
markdown\t'Markdown (knob references only; this is how docs/knobs.md is made)'"
complete -c rnccl -n "__fish_rnccl_using_subcommand env-explain" -l export -d 'Write the effective configuration (yaml) or the YAML config (env) instead of explaining' -r -f -a "yaml\t'The effective configuration as a YAML config'
env\t'The YAML config as shell `export` lines'"
complete -c rnccl -n "__fish_rnccl_using_subcommand env-explain" -l host -d 'Match YAML host sections against this host name instead of this machine\'s' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand env-explain" -l sysfs-root -d 'Read interfaces and HCAs from a tree captured like / (DIR/sys/class/net, DIR/sys/class/infiniband) instead of this host (tests)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand env-explain" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand env-explain" -l all -d 'List every knob rnccl knows instead of the settings in effect'
complete -c rnccl -n "__fish_rnccl_using_subcommand env-explain" -l check -d 'Exit with status 1 when any error is found'
complete -c rnccl -n "__fish_rnccl_using_subcommand env-explain" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rnccl -n "__fish_rnccl_using_subcommand env-explain" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_using_subcommand plot" -s o -l output -d 'The image to write: FILE.svg or FILE.png' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand plot" -l metric -d 'What to draw against size: busbw or algbw (GB/s = 1e9 B/s), or time (µs)' -r -f -a "busbw\t'Bus bandwidth, GB/s (nccl-tests\' busbw: algbw times the collective\'s bus factor)'
algbw\t'Algorithm bandwidth, GB/s (size / time)'
time\t'Time per operation, µs'"
complete -c rnccl -n "__fish_rnccl_using_subcommand plot" -l place -d 'Which measurement of each row: out-of-place or in-place' -r -f -a "out\t'Separate send and receive buffers'
in\t'The receive buffer is the send buffer'"
complete -c rnccl -n "__fish_rnccl_using_subcommand plot" -l label -d 'Legend label of a file, given once per file in the files\' order [default: the file\'s name without its extension]' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand plot" -l title -d 'The title [default: the metric and what every run shares: collective, type, operation, ranks, hosts and devices]' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand plot" -l size -d 'Image size in pixels' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand plot" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand plot" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rnccl -n "__fish_rnccl_using_subcommand plot" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_using_subcommand topo" -l format -d 'Output format' -r -f -a "table\t'Tree, path matrix and findings for people'
json\t'Everything as JSON'
xml\t'NCCL topology XML, as NCCL_TOPO_DUMP_FILE writes it (usable as NCCL_TOPO_FILE)'"
complete -c rnccl -n "__fish_rnccl_using_subcommand topo" -l topo-file -d 'Study another machine offline: an NCCL topology XML file (an NCCL_TOPO_DUMP_FILE, or a file written for NCCL_TOPO_FILE). Without it, this host is detected and merged with NCCL_TOPO_FILE when that is set, as NCCL does. Exits with 1 when NCCL would refuse the file' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand topo" -l sysfs-root -d 'Read sysfs and procfs under DIR instead of / (a tree captured with tests/fixtures/capture_sysfs.py; GPUs then come from DIR/nvml.json)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand topo" -l assume -d 'With --topo-file: what to assume about the host the file describes, for what the file leaves to it (cloud skeletons): gpu=MODEL, fabric=nvswitch|pairs|none, nvlinks=N, nic=MODEL, nic-speed=GBPS, cpu=MODEL; repeat or separate with commas. Unstated ones are guessed from the file\'s PCI ids, classes and link speeds; all are printed' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand topo" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand topo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rnccl -n "__fish_rnccl_using_subcommand topo" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_using_subcommand rings" -l nodes -d 'Number of identical nodes the communicator spans' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand rings" -l format -d 'Output format' -r -f -a "text\t'Summary, NCCL\'s INFO lines, NICs per channel, expected bandwidth'
json\t'Everything as JSON'
xml\t'NCCL\'s graph XML (NCCL_GRAPH_DUMP_FILE format)'"
complete -c rnccl -n "__fish_rnccl_using_subcommand rings" -l topo-file -d 'Study another machine offline: an NCCL topology XML file' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand rings" -l sysfs-root -d 'Read sysfs and procfs under DIR instead of / (GPUs from DIR/nvml.json)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand rings" -l assume -d 'With --topo-file: what to assume about the host the file describes, for what the file leaves to it (cloud skeletons): gpu=MODEL, fabric=nvswitch|pairs|none, nvlinks=N, nic=MODEL, nic-speed=GBPS, cpu=MODEL; repeat or separate with commas. Unstated ones are guessed from the file\'s PCI ids, classes and link speeds; all are printed' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand rings" -l tune -d 'Also print NCCL\'s tuning table and the model\'s choice over a size sweep for this collective (all_reduce, all_gather, reduce_scatter, broadcast, reduce)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand rings" -l rank -d 'Print the INFO lines as this rank prints them' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand rings" -l graph-file -d 'Use the rings and trees of this NCCL graph XML (an NCCL_GRAPH_DUMP_FILE, or a file written for NCCL_GRAPH_FILE) instead of searching them, after NCCL\'s checks against the topology. Defaults to NCCL_GRAPH_FILE when that is set' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand rings" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand rings" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rnccl -n "__fish_rnccl_using_subcommand rings" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_using_subcommand status" -l format -d 'Output format' -r -f -a "text\t'A table per communicator and what is wrong, in sentences'
json\t'Every communicator\'s diagnosis as JSON'"
complete -c rnccl -n "__fish_rnccl_using_subcommand status" -l watch -d 'Ask again every SECS seconds until interrupted, printing each answer' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand status" -l timeout -d 'Seconds each process gets to answer before it is reported as not answering' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand status" -l stuck -d 'Seconds an operation may be in flight before its rank counts as stuck' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand status" -l pages -d 'Folder holding the counter pages (for finding this host\'s jobs)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand status" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rnccl -n "__fish_rnccl_using_subcommand status" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l format -d 'Output format' -r -f -a "text\t'Tables and verdicts for people'
json\t'Everything as JSON: what was read, each check with its evidence, the test results'"
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l hca -d 'Examine only these ports, in NCCL_IB_HCA syntax (`mlx5_0`, `=mlx5_1:1`, `^mlx5_4`)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l sysfs-root -d 'Read sysfs and procfs under DIR instead of / (a captured tree; libibverbs is not asked)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l interval -d 'Read the counters again after this many seconds and judge what grew' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l expect-rate -d 'The rate every port should run at, Gb/s (slower ports are errors)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l peer -d 'Test against `rnccl ibcheck --serve` on HOST[:PORT] (default port 18515)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l port -d 'TCP port of --serve (and of --peer without one)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l size -d 'Bytes per write (K, M, G suffixes)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l iters -d 'Writes per bandwidth test (and round trips per latency test)' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l strict -d 'Exit with 1 when a check warns (errors always give 2)'
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l bw -d 'Measure RDMA write bandwidth and latency (ib_write_bw / ib_write_lat\'s method): between the first two ports NCCL would use (one port: a loopback), or with --peer'
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -l serve -d 'Serve --bw tests from other hosts (on --port), until interrupted'
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rnccl -n "__fish_rnccl_using_subcommand ibcheck" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_using_subcommand top" -l interval -d 'Milliseconds between samples' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand top" -l stuck -d 'Seconds a rank may stall on one link before it is marked stuck' -r
complete -c rnccl -n "__fish_rnccl_using_subcommand top" -l pages -d 'Folder holding the counter pages' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand top" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand top" -l once -d 'Print the jobs screen and each job\'s details as text after two samples (`--interval` apart) and exit, for scripts and logs: no terminal needed; screens are $COLUMNS × $LINES (default 120 × 40)'
complete -c rnccl -n "__fish_rnccl_using_subcommand top" -s h -l help -d 'Print help'
complete -c rnccl -n "__fish_rnccl_using_subcommand top" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_using_subcommand tune" -l out -d 'Folder the best settings are written to (rnccl-tune.yaml and rnccl-tune.sh)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand tune" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand tune" -l cpu -d 'Run the sweeps on CPU ranks even where GPUs are present'
complete -c rnccl -n "__fish_rnccl_using_subcommand tune" -s h -l help -d 'Print help'
complete -c rnccl -n "__fish_rnccl_using_subcommand tune" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_using_subcommand completions" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand completions" -s h -l help -d 'Print help'
complete -c rnccl -n "__fish_rnccl_using_subcommand completions" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_using_subcommand man" -l config -d 'YAML config with NCCL_* knob values (also RNCCL_CONFIG)' -r -F
complete -c rnccl -n "__fish_rnccl_using_subcommand man" -s h -l help -d 'Print help'
complete -c rnccl -n "__fish_rnccl_using_subcommand man" -s V -l version -d 'Print version'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "bench" -d 'Run and time collectives (nccl-tests\' flags and output); all_reduce by default'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "check" -d 'Check hosts\' health: each host alone, pairs, rails; a busbw matrix, outliers flagged'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "env-explain" -d 'Explain the NCCL_* settings in effect, or any knob'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "plot" -d 'Draw saved results (rnccl\'s or nccl-tests\' JSON or text output) as curves against size'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "topo" -d 'Show this host\'s (or a topology file\'s) GPUs, NICs, PCI tree and paths'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "rings" -d 'Show the rings and trees NCCL would build, and the tuning model'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "status" -d 'Ask a running job (any host) how far each rank got, what it waits on, who is behind'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "ibcheck" -d 'Check this host\'s InfiniBand/RoCE adapters, ports, GIDs, counters and placement; test RDMA bandwidth'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "top" -d 'Watch the rnccl jobs on this host live: per-rank, channel and peer traffic, stuck links'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "tune" -d 'Tune NCCL knobs interactively: sweep with them, compare busbw curves, save the best'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "man" -d 'Write the man pages (one per command) into a folder'
complete -c rnccl -n "__fish_rnccl_using_subcommand help; and not __fish_seen_subcommand_from bench check env-explain plot topo rings status ibcheck top tune completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
