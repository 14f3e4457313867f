//! A knob value as YAML gives it ([`YamlValue`]) and its conversion to the text NCCL reads.

use serde::de::{self, Deserialize, Deserializer, SeqAccess, Visitor};

use crate::config::registry::{KnobSpec, KnobType};

/// One YAML scalar.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Scalar {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
}

/// A knob value: a scalar, or a list of scalars for list-valued knobs.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum YamlValue {
    One(Scalar),
    List(Vec<Scalar>),
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = YamlValue;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a knob value (number, true/false, text) or a list of them")
    }
    fn visit_unit<E: de::Error>(self) -> Result<YamlValue, E> {
        Ok(YamlValue::One(Scalar::Null))
    }
    fn visit_none<E: de::Error>(self) -> Result<YamlValue, E> {
        Ok(YamlValue::One(Scalar::Null))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<YamlValue, E> {
        Ok(YamlValue::One(Scalar::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<YamlValue, E> {
        Ok(YamlValue::One(Scalar::Int(v.into())))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<YamlValue, E> {
        Ok(YamlValue::One(Scalar::Int(v.into())))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<YamlValue, E> {
        Ok(YamlValue::One(Scalar::Int(v)))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<YamlValue, E> {
        Ok(YamlValue::One(Scalar::Int(
            i128::try_from(v).unwrap_or(i128::MAX),
        )))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<YamlValue, E> {
        Ok(YamlValue::One(Scalar::Float(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<YamlValue, E> {
        Ok(YamlValue::One(Scalar::Str(v.to_string())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<YamlValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<YamlValue>()? {
            match item {
                YamlValue::One(s) => items.push(s),
                YamlValue::List(_) => {
                    return Err(de::Error::custom(
                        "a list inside a list; write the items in one flat list",
                    ));
                }
            }
        }
        Ok(YamlValue::List(items))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, _map: A) -> Result<YamlValue, A::Error> {
        Err(de::Error::custom(
            "a mapping where a knob value belongs; knobs take a number, true/false, text or a list",
        ))
    }
}

impl<'de> Deserialize<'de> for YamlValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<YamlValue, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

impl YamlValue {
    /// The text NCCL would read for this value of `spec`: YAML booleans become `1`/`0` for switches,
    /// lists are joined with the knob's separator.
    ///
    /// Errors: a sentence saying why this YAML value cannot be that knob's value.
    pub(super) fn to_nccl_text(&self, spec: &KnobSpec) -> Result<String, String> {
        match self {
            YamlValue::One(s) => scalar_text(spec, s),
            YamlValue::List(items) => {
                let sep = match spec.ty {
                    KnobType::DeviceList
                    | KnobType::Bitset(_)
                    | KnobType::NameList
                    | KnobType::CpuList => ",",
                    KnobType::AlgoList | KnobType::ProtoList | KnobType::NicGroups => ";",
                    KnobType::IntList => " ",
                    _ => {
                        return Err(format!(
                            "{} takes one value ({}), not a list",
                            spec.name,
                            spec.ty.short_name()
                        ));
                    }
                };
                let parts: Result<Vec<String>, String> =
                    items.iter().map(|s| scalar_text(spec, s)).collect();
                Ok(parts?.join(sep))
            }
        }
    }
}

fn scalar_text(spec: &KnobSpec, s: &Scalar) -> Result<String, String> {
    let switchable = spec.ty.is_switch()
        || matches!(spec.ty, KnobType::Choice(c) if c.iter().map(|c| c.value).eq(["0", "1"]));
    match s {
        Scalar::Null => Err(
            "has no value; remove the key to leave the knob unset, or write \"\" for an empty value"
                .into(),
        ),
        Scalar::Bool(b) if switchable => Ok(if *b { "1" } else { "0" }.into()),
        Scalar::Bool(b) => Err(format!(
            "{} is a {}, not a switch, but YAML read the value as the boolean {b}; quote it if you meant the word",
            spec.name,
            spec.ty.short_name()
        )),
        Scalar::Int(i) => Ok(i.to_string()),
        Scalar::Float(f) if spec.ty == KnobType::Float => Ok(f.to_string()),
        Scalar::Float(f) => Err(format!(
            "{f} is not a whole number; {} takes a {} (quote it if you meant the text)",
            spec.name,
            spec.ty.short_name()
        )),
        Scalar::Str(t) => Ok(t.clone()),
    }
}
