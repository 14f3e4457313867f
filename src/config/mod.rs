//! The knob registry: every `NCCL_*` setting rnccl knows, read with NCCL's sources and
//! precedence, each effective value carrying where it came from.
//!
//! Precedence, highest first (see [`load`] for details):
//! 1. the process environment;
//! 2. the YAML config (`--config FILE` or `RNCCL_CONFIG`): its matching `hosts` sections, then its
//!    global `knobs`;
//! 3. `NCCL_CONF_FILE`, or `$HOME/.nccl.conf` when that is unset;
//! 4. `/etc/nccl.conf` (or the file named by `RNCCL_SYSTEM_CONF`);
//! 5. the registry default.
//!
//! Steps 1, 3 and 4 are NCCL's own (`src/misc/param.cc:initEnvFunc`): a file value never
//! overrides one already set. The YAML config slots in as if its values were exported just before
//! NCCL starts, without replacing a real environment variable. Every other module reads knobs only
//! through [`Config`].

mod conf_file;
pub mod docs;
mod error;
mod finding;
pub mod load;
pub(crate) mod names;
mod parse;
mod registry;
mod source;
pub mod syntax;
mod validate;
pub mod value;
pub mod yaml;

use std::collections::BTreeMap;

pub use error::{BadValue, ConfigError};
pub use finding::{Finding, Severity};
pub use load::{FileRead, FileRole, LoadNote, LoadOptions};
pub use parse::{Strtoll, c_strtoll, parse_c_int};
pub use registry::{
    BUFFSIZE_MAX, BUFFSIZE_MIN, Category, Choice, HONOURED, KNOBS, KnobSpec, KnobType,
    NCCL_VERSION, OLDEST_TAG, Origin, Status, Subsystem, Unit, did_you_mean, lookup, lookup_loose,
    sorted,
};
pub use source::{Setting, Source, YamlKey};

/// What [`Config::int`] returns for a knob NCCL leaves unset by default (e.g. `NCCL_MAX_CTAS`):
/// rnccl's "auto, let the engine decide" sentinel, the same as NCCL's `-2`.
pub const AUTO: i64 = -2;

/// The effective configuration: every knob that is set, with its provenance, plus what each
/// source supplied that lost to a higher one. Knobs that are not set read as their registry
/// default.
#[derive(Debug, Clone, Default)]
pub struct Config {
    values: BTreeMap<String, Setting>,
    shadowed: BTreeMap<String, Vec<Setting>>,
    files: Vec<FileRead>,
    notes: Vec<LoadNote>,
    hostname: Option<String>,
}

impl Config {
    /// A configuration with nothing set: every knob reads as its default.
    pub fn defaults() -> Config {
        Config::default()
    }

    /// The configuration `pairs` (name, value) make on their own, as if they were the whole
    /// environment and no conf or YAML file existed (no `$HOME/.nccl.conf`, no
    /// `/etc/nccl.conf`): for programs and tests that set their knobs explicitly. Values are
    /// kept as given, good or bad (reading one reports what is wrong with it).
    ///
    /// Errors: as [`Config::load`], for a file a pair names (`NCCL_CONF_FILE`,
    /// `RNCCL_CONFIG`) that cannot be read.
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::load(&LoadOptions {
            env: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            home: Some("/nonexistent".into()),
            system_conf: Some("/nonexistent/nccl.conf".into()),
            ..LoadOptions::default()
        })
    }

    /// Loads the process environment, the YAML config named by `RNCCL_CONFIG` and the conf files
    /// with the precedence in this module's docs.
    ///
    /// Errors: as [`Config::load`].
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::load(&LoadOptions::default())
    }

    /// Sets `name` with the highest precedence (used for CLI flags that map to knobs); a value it
    /// replaces is kept as overridden.
    pub fn set(&mut self, name: &str, value: impl Into<String>, source: Source) {
        let new = Setting {
            raw: value.into(),
            source,
        };
        if let Some(old) = self.values.insert(name.to_string(), new) {
            self.shadowed
                .entry(name.to_string())
                .or_default()
                .insert(0, old);
        }
    }

    /// The effective setting of `name`, if it is set anywhere.
    pub fn setting(&self, name: &str) -> Option<&Setting> {
        self.values.get(name)
    }

    /// Every setting in effect, by name (including names that are not knobs, from conf files).
    pub fn settings(&self) -> impl Iterator<Item = (&str, &Setting)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Settings of `name` from lower-precedence sources that the effective one overrides, highest
    /// first (e.g. the `/etc/nccl.conf` line hidden by an environment variable).
    pub fn overridden(&self, name: &str) -> &[Setting] {
        self.shadowed.get(name).map_or(&[], Vec::as_slice)
    }

    /// The files the loader looked at, in order, with how many settings each supplied.
    pub fn files(&self) -> &[FileRead] {
        &self.files
    }

    /// Lines of conf files that NCCL skips or reads differently than they look.
    pub fn notes(&self) -> &[LoadNote] {
        &self.notes
    }

    /// The host name YAML host sections were matched against (`None` for [`Config::defaults`]).
    pub fn hostname(&self) -> Option<&str> {
        self.hostname.as_deref()
    }

    /// The raw string value of `name` if set and non-empty (NCCL treats empty as unset). Any
    /// name can be read, registered or not (a conf file may set anything); the value is not
    /// judged here: [`Config::validate`] does that for every setting at once.
    pub fn string(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .map(|s| s.raw.as_str())
            .filter(|s| !s.is_empty())
    }

    /// The raw value of `name` if set and non-empty, once [`value::read`] (the verdict
    /// `env-explain` shows) finds no error in it: for knobs with their own syntax (lists, device
    /// filters, keywords) that the caller then parses.
    ///
    /// Errors: [`ConfigError::BadValue`] when the value is one `env-explain` calls an error;
    /// [`ConfigError::UnknownKnob`] for a name the registry does not hold.
    pub fn text(&self, name: &str) -> Result<Option<&str>, ConfigError> {
        let spec = Config::spec_for(name, |_| true, "")?;
        self.judged(spec)?;
        Ok(self.string(name))
    }

    /// The error for `name`'s value when a caller's own parser refuses it after
    /// [`Config::text`] accepted it (the two disagree: a bug, reported rather than hidden).
    pub(crate) fn refuse(&self, name: &str, problem: String, hint: String) -> ConfigError {
        let setting = self.values.get(name);
        ConfigError::from(BadValue {
            name: name.to_string(),
            value: setting.map(|s| s.raw.clone()).unwrap_or_default(),
            origin: setting.map_or(Source::Default, |s| s.source.clone()),
            problem,
            hint,
            accepted: lookup(name).map_or_else(String::new, KnobSpec::accepted),
        })
    }

    /// The registry entry of `name`, checked to be readable as `wanted`.
    fn spec_for(
        name: &str,
        fits: fn(&KnobType) -> bool,
        wanted: &'static str,
    ) -> Result<&'static KnobSpec, ConfigError> {
        let spec = lookup(name).ok_or_else(|| ConfigError::UnknownKnob {
            name: name.to_string(),
            suggestions: did_you_mean(name),
        })?;
        if !fits(&spec.ty) {
            return Err(ConfigError::WrongType {
                name: name.to_string(),
                ty: spec.ty.short_name(),
                wanted,
                accessor: if spec.ty == KnobType::Float {
                    "float"
                } else {
                    "string"
                },
            });
        }
        Ok(spec)
    }

    /// The reading of `name`'s value by [`value::read`] (the code `env-explain` shows), or
    /// `None` when unset or empty.
    ///
    /// Errors: [`ConfigError::BadValue`] when the reading holds an error.
    fn judged(&self, spec: &'static KnobSpec) -> Result<Option<value::Reading>, ConfigError> {
        let Some(s) = self.values.get(spec.name).filter(|s| !s.raw.is_empty()) else {
            return Ok(None);
        };
        let reading = value::read(spec, &s.raw);
        match value::bad_value(spec, s, &reading) {
            Some(bad) => Err(bad.into()),
            None => Ok(Some(reading)),
        }
    }

    /// The integer value of `name`, as NCCL reads it (C `strtoll(s, NULL, 0)`: `0x` hex,
    /// leading-`0` octal; switches of NCCL's typed registry as 1/0), or the registry default when
    /// unset or empty — [`AUTO`] (-2) for knobs NCCL leaves unset by default.
    ///
    /// The verdict is `env-explain`'s ([`value::read`]): a value it calls an error is refused,
    /// one it only warns about (`010` is octal 8, trailing spaces) is read as NCCL reads it.
    ///
    /// Errors: [`ConfigError::BadValue`] naming the knob, the value, its source, what is wrong and
    /// what the knob accepts (NCCL would silently use a default or a garbage prefix; rnccl
    /// refuses); [`ConfigError::UnknownKnob`] for a name the registry does not hold;
    /// [`ConfigError::WrongType`] for a knob that is not an integer or switch.
    pub fn int(&self, name: &str) -> Result<i64, ConfigError> {
        let spec = Config::spec_for(
            name,
            |t| t.is_integer() || t.is_switch(),
            "an integer or switch",
        )?;
        let Some(reading) = self.judged(spec)? else {
            return Ok(value::default_int(spec).unwrap_or(AUTO));
        };
        match reading.effective.as_str() {
            "TRUE" => Ok(1),
            "FALSE" => Ok(0),
            v => v.parse().map_err(|_| {
                self.refuse(
                    name,
                    format!("reads as {v:?}, which is not an integer"),
                    "write a decimal number".into(),
                )
            }),
        }
    }

    /// The on/off value of `name`: a switch (`!= 0`, or `1/T/TRUE` for typed switches), or
    /// `false` when unset with no default. Knobs whose default is an auto sentinel (-2) are better
    /// read with [`Config::int`].
    ///
    /// Errors: as [`Config::int`].
    pub fn flag(&self, name: &str) -> Result<bool, ConfigError> {
        let spec = Config::spec_for(
            name,
            |t| t.is_integer() || t.is_switch(),
            "an integer or switch",
        )?;
        let unset = self.string(name).is_none();
        if unset && spec.default.is_empty() {
            return Ok(false);
        }
        Ok(self.int(name)? != 0)
    }

    /// The decimal value of a floating-point knob (`NCCL_TESTS_MIN_BW`), or its default; `None`
    /// when unset with no default.
    ///
    /// Errors: as [`Config::int`], with [`ConfigError::WrongType`] for a knob that is not a float.
    pub fn float(&self, name: &str) -> Result<Option<f64>, ConfigError> {
        let spec = Config::spec_for(name, |t| *t == KnobType::Float, "a number")?;
        let text = match self.judged(spec)? {
            Some(reading) => reading.effective,
            None if spec.default.is_empty() => return Ok(None),
            None => spec.default.to_string(),
        };
        text.parse().map(Some).map_err(|_| {
            self.refuse(
                name,
                format!("{text:?} does not read as a number"),
                "write a decimal number such as 12.5".into(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> LoadOptions {
        LoadOptions {
            env: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            home: Some("/nonexistent".into()),
            system_conf: Some("/nonexistent/nccl.conf".into()),
            ..LoadOptions::default()
        }
    }

    #[test]
    fn env_beats_user_file_beats_system_file() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.conf");
        let system = dir.path().join("system.conf");
        std::fs::write(
            &user,
            "NCCL_BUFFSIZE=0x100\n# NCCL_MIN_NCHANNELS=9\nNCCL_MAX_NCHANNELS=4\n",
        )
        .unwrap();
        std::fs::write(&system, "NCCL_MAX_NCHANNELS=8\nNCCL_SHM_DISABLE=1\r\n").unwrap();
        let mut o = opts(&[
            ("NCCL_BUFFSIZE", "1024"),
            ("NCCL_CONF_FILE", user.to_str().unwrap()),
        ]);
        o.system_conf = Some(system.clone());
        let c = Config::load(&o).unwrap();
        assert_eq!(c.int("NCCL_BUFFSIZE").unwrap(), 1024);
        assert_eq!(c.int("NCCL_MAX_NCHANNELS").unwrap(), 4);
        assert_eq!(
            c.setting("NCCL_MAX_NCHANNELS").unwrap().source,
            Source::ConfFile {
                path: user.clone(),
                line: 3
            }
        );
        assert_eq!(
            c.overridden("NCCL_MAX_NCHANNELS")[0].source,
            Source::ConfFile {
                path: system,
                line: 1
            }
        );
        assert_eq!(c.overridden("NCCL_BUFFSIZE")[0].raw, "0x100");
        assert!(c.flag("NCCL_SHM_DISABLE").unwrap());
        assert_eq!(
            c.int("NCCL_MIN_NCHANNELS").unwrap(),
            -2,
            "commented line ignored"
        );
    }

    #[test]
    fn bad_integer_names_knob_value_and_source() {
        let c = Config::load(&opts(&[("NCCL_MAX_NCHANNELS", "lots")])).unwrap();
        let e = c.int("NCCL_MAX_NCHANNELS").unwrap_err().to_string();
        assert!(
            e.contains("NCCL_MAX_NCHANNELS") && e.contains("lots") && e.contains("environment"),
            "{e}"
        );
    }

    #[test]
    fn defaults_auto_and_switches() {
        let c = Config::defaults();
        assert_eq!(c.int("NCCL_BUFFSIZE").unwrap(), -2);
        assert_eq!(
            c.int("NCCL_MAX_CTAS").unwrap(),
            AUTO,
            "NCCL leaves it unset"
        );
        assert_eq!(c.int("NCCL_IB_TIMEOUT").unwrap(), 20);
        assert_eq!(c.int("RNCCL_TIMEOUT").unwrap(), 300);
        assert!(!c.flag("NCCL_P2P_DISABLE").unwrap(), "unset means allowed");
        assert!(
            !c.flag("NCCL_WARN_ENABLE_DEBUG_INFO").unwrap(),
            "default 'false'"
        );
        assert!(c.flag("NCCL_RAS_ENABLE").unwrap());
        assert_eq!(c.string("NCCL_ALGO"), None);
    }

    #[test]
    fn range_and_choices_are_enforced() {
        let c = Config::load(&opts(&[
            ("NCCL_CROSS_NIC", "5"),
            ("NCCL_MAX_CTAS", "65"),
            ("NCCL_SET_THREAD_NAME", "TRUE"),
            ("NCCL_IB_RETRY_CNT", "07"),
        ]))
        .unwrap();
        assert!(
            c.int("NCCL_CROSS_NIC")
                .unwrap_err()
                .to_string()
                .contains("use one of 0 (")
        );
        assert!(
            c.int("NCCL_MAX_CTAS")
                .unwrap_err()
                .to_string()
                .contains("1 to 64")
        );
        assert!(c.flag("NCCL_SET_THREAD_NAME").unwrap());
        assert_eq!(c.int("NCCL_IB_RETRY_CNT").unwrap(), 7);
    }

    #[test]
    fn set_overrides_and_keeps_the_old_value() {
        let mut c = Config::load(&opts(&[("RNCCL_TIMEOUT", "10")])).unwrap();
        c.set("RNCCL_TIMEOUT", "20", Source::Program("bench -T".into()));
        assert_eq!(c.int("RNCCL_TIMEOUT").unwrap(), 20);
        assert_eq!(c.overridden("RNCCL_TIMEOUT")[0].source, Source::Env);
        assert_eq!(
            c.setting("RNCCL_TIMEOUT").unwrap().source.to_string(),
            "bench -T"
        );
    }
}
