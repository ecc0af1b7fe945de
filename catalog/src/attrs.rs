use crate::CatalogError;

/// One attribute value, as carried by `vsdk_attr_t`.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Int(i64),
    Float(f64),
    Str(String),
    Ints(Vec<i64>),
    Floats(Vec<f64>),
}

impl AttrValue {
    fn kind(&self) -> &'static str {
        match self {
            AttrValue::Int(_) => "int",
            AttrValue::Float(_) => "float",
            AttrValue::Str(_) => "string",
            AttrValue::Ints(_) => "int list",
            AttrValue::Floats(_) => "float list",
        }
    }
}

/// The attributes of one call, in the order given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attrs(pub Vec<(String, AttrValue)>);

impl Attrs {
    pub fn new() -> Self {
        Attrs(Vec::new())
    }

    /// Adds an attribute (builder style).
    pub fn with(mut self, name: &str, value: AttrValue) -> Self {
        self.0.push((name.to_string(), value));
        self
    }

    pub fn get(&self, name: &str) -> Option<&AttrValue> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// Fails on a name the kernel does not define or a name given twice: a
    /// typo must not silently fall back to a default.
    pub(crate) fn check_names(
        &self,
        kernel: &'static str,
        allowed: &[&str],
    ) -> Result<(), CatalogError> {
        for (i, (name, _)) in self.0.iter().enumerate() {
            if !allowed.contains(&name.as_str()) {
                return Err(attr_err(
                    kernel,
                    name,
                    format!(
                        "not an attribute of this kernel (it has: {})",
                        allowed.join(", ")
                    ),
                ));
            }
            if self.0[..i].iter().any(|(n, _)| n == name) {
                return Err(attr_err(kernel, name, "given twice".into()));
            }
        }
        Ok(())
    }

    fn typed<'a, T>(
        &'a self,
        kernel: &'static str,
        name: &str,
        want: &str,
        pick: impl Fn(&'a AttrValue) -> Option<T>,
    ) -> Result<Option<T>, CatalogError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => pick(v).map(Some).ok_or_else(|| {
                attr_err(kernel, name, format!("expected {want}, got {}", v.kind()))
            }),
        }
    }

    pub(crate) fn int(
        &self,
        kernel: &'static str,
        name: &str,
    ) -> Result<Option<i64>, CatalogError> {
        self.typed(kernel, name, "int", |v| match v {
            AttrValue::Int(i) => Some(*i),
            _ => None,
        })
    }

    /// A float attribute; an int is accepted and widened.
    pub(crate) fn float(
        &self,
        kernel: &'static str,
        name: &str,
    ) -> Result<Option<f64>, CatalogError> {
        self.typed(kernel, name, "float", |v| match v {
            AttrValue::Float(f) => Some(*f),
            AttrValue::Int(i) => Some(*i as f64),
            _ => None,
        })
    }

    pub(crate) fn string(
        &self,
        kernel: &'static str,
        name: &str,
    ) -> Result<Option<&str>, CatalogError> {
        self.typed(kernel, name, "string", |v| match v {
            AttrValue::Str(s) => Some(s.as_str()),
            _ => None,
        })
    }

    pub(crate) fn ints(
        &self,
        kernel: &'static str,
        name: &str,
    ) -> Result<Option<&[i64]>, CatalogError> {
        self.typed(kernel, name, "int list", |v| match v {
            AttrValue::Ints(x) => Some(x.as_slice()),
            _ => None,
        })
    }

    pub(crate) fn floats(
        &self,
        kernel: &'static str,
        name: &str,
    ) -> Result<Option<&[f64]>, CatalogError> {
        self.typed(kernel, name, "float list", |v| match v {
            AttrValue::Floats(x) => Some(x.as_slice()),
            _ => None,
        })
    }
}

pub(crate) fn attr_err(kernel: &'static str, name: &str, reason: String) -> CatalogError {
    CatalogError::Attr {
        kernel,
        attr: name.to_string(),
        reason,
    }
}
