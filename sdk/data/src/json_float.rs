//! A float64 in JSON, non-finite values included: JSON has no NaN or
//! infinity (serde_json would write `null` and could not read it back), so
//! they are the strings "NaN", "inf" and "-inf". Used as
//! `#[serde(with = "crate::json_float")]` by the results and the reports.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Repr {
    Number(f64),
    Text(String),
}

pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    match *v {
        v if v.is_finite() => Repr::Number(v),
        v if v.is_nan() => Repr::Text("NaN".into()),
        v if v > 0.0 => Repr::Text("inf".into()),
        _ => Repr::Text("-inf".into()),
    }
    .serialize(s)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match Repr::deserialize(d)? {
        Repr::Number(v) => Ok(v),
        Repr::Text(t) => match t.as_str() {
            "NaN" => Ok(f64::NAN),
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            _ => Err(serde::de::Error::custom(format!(
                "`{t}`: expected a number, \"NaN\", \"inf\" or \"-inf\""
            ))),
        },
    }
}

/// `Option<f64>`, the same way.
pub mod option {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => super::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        #[derive(Deserialize)]
        struct Wrapped(#[serde(with = "super")] f64);
        Ok(Option::<Wrapped>::deserialize(d)?.map(|Wrapped(v)| v))
    }
}
