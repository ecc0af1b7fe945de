//! The document checker: the parsed YAML (`raw.rs`) to the checked model
//! (`mod.rs`), every reference, name, kernel and limit checked, each problem
//! at its file:line:column.

use super::*;

pub(super) struct Validator<'a, F: Fn(Location, &str, String) -> DocumentError> {
    fail: &'a F,
    /// Declared tensors by name, for reference checks.
    tensors: IndexMap<String, TensorDecl>,
    /// Bytes of the seeded tensors declared so far, once generated.
    seeded_bytes: u64,
    /// `layout.tokens`, given to every stage.
    token_grid: Option<TokenGrid>,
}

impl<'a, F: Fn(Location, &str, String) -> DocumentError> Validator<'a, F> {
    pub(super) fn new(fail: &'a F) -> Self {
        Validator {
            fail,
            tensors: IndexMap::new(),
            seeded_bytes: 0,
            token_grid: None,
        }
    }

    fn err<T>(
        &self,
        location: Location,
        field: &str,
        message: impl Into<String>,
    ) -> Result<T, DocumentError> {
        Err((self.fail)(location, field, message.into()))
    }

    pub(super) fn document(
        &mut self,
        path: &Path,
        raw: RawDocument,
    ) -> Result<Document, DocumentError> {
        if *raw.vips != SCHEMA_VERSION {
            return self.err(
                at(&raw.vips),
                "vips",
                format!(
                    "schema version {} is not supported (this SDK reads {SCHEMA_VERSION})",
                    *raw.vips
                ),
            );
        }
        let c = raw.component;
        if c.id.is_empty()
            || !c
                .id
                .chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-' || ch == '_')
        {
            return self.err(
                at(&c.id),
                "component.id",
                format!("`{}` is not a short id ([a-z0-9_-]+)", *c.id),
            );
        }
        if let Err(e) = semver::Version::parse(&c.version) {
            return self.err(
                at(&c.version),
                "component.version",
                format!("`{}` is not a semantic version: {e}", *c.version),
            );
        }
        let component = Component {
            id: c.id.to_string(),
            version: c.version.to_string(),
            title: c.title,
            paper: c.paper,
            notes: c.notes,
        };
        let base = path.parent().unwrap_or(Path::new("."));
        let uses = raw
            .uses
            .into_iter()
            .enumerate()
            .map(|(i, u)| {
                let field = format!("uses[{i}].sha256");
                let sha256 = hex::decode(u.sha256.as_str())
                    .ok()
                    .and_then(|b| <[u8; 32]>::try_from(b).ok());
                let Some(sha256) = sha256 else {
                    return self.err(
                        at(&u.sha256),
                        &field,
                        "expected 64 hex digits (the SHA-256 of the component's document)",
                    );
                };
                Ok(Use {
                    component: u.component.to_string(),
                    version: u.version.to_string(),
                    sha256,
                    path: base.join(u.path.as_str()),
                    at: at(&u.component),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        for (name, t) in raw.tensors {
            let decl = self.tensor(&name, t)?;
            self.tensors.insert(name.to_string(), decl);
        }
        if let Some(layout) = &raw.layout {
            self.token_grid = Some(self.token_grid(&layout.tokens)?);
        }
        let sdk_defaults = Tier::ALL
            .into_iter()
            .map(|t| (t, TierParams::default_for(t)))
            .collect();
        let defaults = self.tolerances("tolerances", &raw.tolerances, &sdk_defaults)?;
        self.known_kernels(&raw.stages)?;
        let mut stages: Vec<Stage> = Vec::new();
        for (i, s) in raw.stages.into_iter().enumerate() {
            let field = format!("stages[{i}]");
            if let Some(prev) = stages.iter().find(|p| p.name == *s.stage) {
                return self.err(
                    at(&s.stage),
                    &format!("{field}.stage"),
                    format!(
                        "stage `{}` is defined twice (first at {})",
                        *s.stage, prev.at
                    ),
                );
            }
            let stage = self.stage(&field, s, &defaults, &stages)?;
            stages.push(stage);
        }
        if stages.is_empty() {
            return self.err(
                Location::default(),
                "stages",
                "a document needs at least one stage",
            );
        }
        let golden_budget = match &raw.golden {
            Some(g) if *g.budget_bytes > crate::limits::MAX_GOLDEN_BYTES => {
                return self.err(
                    at(&g.budget_bytes),
                    "golden.budget_bytes",
                    format!(
                        "{} bytes is above the {}-byte limit of a golden file",
                        *g.budget_bytes,
                        crate::limits::MAX_GOLDEN_BYTES
                    ),
                );
            }
            g => g.as_ref().map(|g| *g.budget_bytes),
        };
        let weights = match &raw.weights {
            None => None,
            Some(w) => Some(self.weights_pin(base, w)?),
        };
        Ok(Document {
            path: path.to_path_buf(),
            sha256: [0; 32],
            component,
            uses,
            tensors: std::mem::take(&mut self.tensors).into_values().collect(),
            stages,
            golden_budget,
            weights,
        })
    }

    /// `weights: { file, sha256 }`: a `.safetensors` file and 64 hex digits.
    fn weights_pin(&self, base: &Path, w: &RawWeights) -> Result<WeightsPin, DocumentError> {
        if !w.file.ends_with(".safetensors") || w.file.len() == ".safetensors".len() {
            return self.err(
                at(&w.file),
                "weights.file",
                format!(
                    "`{}`: the pinned weights file is a `.safetensors` file",
                    w.file.as_str()
                ),
            );
        }
        let sha256 = hex::decode(w.sha256.as_str())
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok());
        let Some(sha256) = sha256 else {
            return self.err(
                at(&w.sha256),
                "weights.sha256",
                "expected 64 hex digits (the SHA-256 of the whole weights file)",
            );
        };
        Ok(WeightsPin {
            file: w.file.to_string(),
            path: base.join(w.file.as_str()),
            sha256,
            at: at(&w.file),
        })
    }

    /// Every graph node names a catalog kernel: one error listing every
    /// unknown kernel of the document, each with its place, stage and node
    /// (the first also with what the catalog knows).
    fn known_kernels(&self, stages: &[RawStage]) -> Result<(), DocumentError> {
        let mut unknown: Vec<DocumentError> = Vec::new();
        for (i, s) in stages.iter().enumerate() {
            for (j, n) in s.graph.iter().enumerate() {
                let (name, version) = split_kernel(&n.op);
                let Err(e) = Op::lookup(name, version) else {
                    continue;
                };
                let node = match n.outputs.first() {
                    Some(out) => format!("node {j}, output `{}`", out.as_str()),
                    None => format!("node {j}"),
                };
                let message = match e {
                    vsdk_catalog::CatalogError::UnknownKernel {
                        name,
                        version,
                        known,
                    } => {
                        let known = if unknown.is_empty() {
                            format!("; catalog v1 knows: {known}")
                        } else {
                            String::new()
                        };
                        format!(
                            "unknown kernel `{name}@{version}` in stage `{}` ({node}{known})",
                            s.stage.as_str()
                        )
                    }
                    other => format!("{other} (stage `{}`, {node})", s.stage.as_str()),
                };
                unknown.push((self.fail)(
                    at(&n.op),
                    &format!("stages[{i}].graph[{j}].op"),
                    message,
                ));
            }
        }
        if unknown.is_empty() {
            return Ok(());
        }
        let mut first = unknown.remove(0);
        first.also = unknown;
        Err(first)
    }

    /// `layout.tokens`: 2 or 3 sides of at least 1, at most
    /// [`MAX_GRID_TOKENS`] tokens in all.
    fn token_grid(&self, raw: &RawTokenGrid) -> Result<TokenGrid, DocumentError> {
        let field = "layout.tokens.grid";
        let sides: Vec<u64> = raw.grid.iter().map(|s| **s).collect();
        let first = raw.grid.first().map(at).unwrap_or_default();
        if !(2..=3).contains(&sides.len()) || sides.contains(&0) {
            return self.err(
                first,
                field,
                format!("expected 2 or 3 sides of at least 1 ([height, width] or [depth, height, width]), got {sides:?}"),
            );
        }
        let prefix = raw.prefix.as_ref().map_or(0, |p| **p);
        let tokens = sides
            .iter()
            .try_fold(1u64, |n, &s| n.checked_mul(s))
            .and_then(|n| n.checked_add(prefix))
            .filter(|&n| n <= MAX_GRID_TOKENS);
        if tokens.is_none() {
            return self.err(
                first,
                field,
                format!(
                    "{prefix} + the product of {sides:?} tokens is more than {MAX_GRID_TOKENS}"
                ),
            );
        }
        let mut grid = [1usize; 3];
        for (to, &side) in grid.iter_mut().rev().zip(sides.iter().rev()) {
            *to = side as usize;
        }
        Ok(TokenGrid {
            prefix: prefix as usize,
            grid,
        })
    }

    fn tensor(
        &mut self,
        name: &Spanned<String>,
        t: RawTensor,
    ) -> Result<TensorDecl, DocumentError> {
        let field = format!("tensors.{}", name.as_str());
        let Some(dtype) = DType::from_name(&t.dtype) else {
            return self.err(at(&t.dtype), &format!("{field}.dtype"), format!("unknown dtype `{}` (one of float16, bfloat16, float32, float64, uint8, int32, int64)", *t.dtype));
        };
        let shape = t
            .shape
            .map(|s| s.into_iter().map(|d| d as usize).collect::<Vec<_>>());
        // Every size is bounded, with overflow detection, before anything
        // is generated or allocated.
        let bytes = match &shape {
            None => 0,
            Some(s) => match TensorSpec::new(dtype, s).bounded_size_bytes() {
                Ok(b) => b as u64,
                Err(e) => return self.err(at(name), &format!("{field}.shape"), e),
            },
        };
        let source = match &*t.source {
            RawSource::Golden => TensorSource::Golden,
            RawSource::Weights(key) => TensorSource::Weights(key.clone()),
            RawSource::Values(v) => {
                let n = shape
                    .as_deref()
                    .map_or(0, |s| TensorSpec::new(dtype, s).numel());
                if shape.is_none() || n != v.len() {
                    return self.err(
                        at(&t.source),
                        &format!("{field}.source.values"),
                        format!(
                            "{} values given for shape {:?}: give a shape holding exactly them",
                            v.len(),
                            shape
                        ),
                    );
                }
                TensorSource::Values(v.clone())
            }
            RawSource::Seeded(s) => {
                let distribution =
                    match (s.uniform, s.normal, s.test_image) {
                        (Some([low, high]), None, false) => Distribution::Uniform { low, high },
                        (None, Some([mean, std]), false) => Distribution::Normal { mean, std },
                        (None, None, true) => Distribution::TestImage,
                        _ => return self.err(
                            at(&t.source),
                            &format!("{field}.source.seeded"),
                            "give exactly one of `uniform: [low, high]`, `normal: [mean, std]` or `test_image: true`",
                        ),
                    };
                if let Err(e) = distribution.validate() {
                    return self.err(at(&t.source), &format!("{field}.source.seeded"), e);
                }
                let image = distribution == Distribution::TestImage;
                if (image && dtype != DType::U8) || (!image && !dtype.is_float()) {
                    let want = if image { "uint8" } else { "float dtypes only" };
                    return self.err(
                        at(&t.dtype),
                        &format!("{field}.dtype"),
                        format!("{dtype} tensors cannot be seeded this way ({want})"),
                    );
                }
                if shape.is_none() {
                    return self.err(
                        at(&t.source),
                        &format!("{field}.shape"),
                        "a seeded tensor needs a shape",
                    );
                }
                if bytes > MAX_SEEDED_TENSOR_BYTES {
                    return self.err(
                        at(name),
                        &format!("{field}.shape"),
                        format!(
                            "a seeded {dtype} {:?} tensor is {bytes} bytes once generated, above the \
                             {MAX_SEEDED_TENSOR_BYTES}-byte limit for seeded tensors",
                            shape.as_deref().unwrap_or_default()
                        ),
                    );
                }
                self.seeded_bytes += bytes;
                if self.seeded_bytes > MAX_SEEDED_TOTAL_BYTES {
                    return self.err(
                        at(name),
                        &format!("{field}.shape"),
                        format!(
                            "the seeded tensors up to this one total {} bytes once generated, above \
                             the {MAX_SEEDED_TOTAL_BYTES}-byte limit for a document",
                            self.seeded_bytes
                        ),
                    );
                }
                TensorSource::Seeded(Seeded {
                    seed: s.seed,
                    distribution,
                })
            }
        };
        Ok(TensorDecl {
            name: name.to_string(),
            dtype,
            shape,
            source,
            description: t.description,
            at: at(name),
        })
    }

    fn tolerances(
        &self,
        field: &str,
        raw: &IndexMap<Spanned<String>, RawTolerance>,
        defaults: &BTreeMap<Tier, TierParams>,
    ) -> Result<BTreeMap<Tier, TierParams>, DocumentError> {
        let mut out = defaults.clone();
        for (name, t) in raw {
            let f = format!("{field}.{}", name.as_str());
            let Some(tier) = Tier::from_name(name) else {
                return self.err(
                    at(name),
                    &f,
                    format!("unknown tier `{}` (fp32, fp16, bf16, exact)", name.as_str()),
                );
            };
            let p = out.get_mut(&tier).expect("every tier has defaults");
            let positive = |v: Option<f64>, what: &str| match v {
                Some(v) if !(v.is_finite() && v > 0.0) => {
                    Err(format!("{what} must be finite and > 0, got {v}"))
                }
                _ => Ok(()),
            };
            let e2e = t.end_to_end.as_ref();
            let checks = [
                positive(t.lambda, "lambda"),
                positive(t.bias_z, "bias_z"),
                positive(t.bias_ratio, "bias_ratio"),
                positive(t.rms_factor, "rms_factor"),
                positive(e2e.and_then(|e| e.rel_l2), "end_to_end.rel_l2"),
                match t.subpixel_bits {
                    Some(b) if !(1..=24).contains(&b) => {
                        Err(format!("subpixel_bits must lie in [1, 24], got {b}"))
                    }
                    _ => Ok(()),
                },
                match e2e.and_then(|e| e.cosine) {
                    Some(c) if !(c > 0.0 && c <= 1.0) => {
                        Err(format!("end_to_end.cosine must lie in (0, 1], got {c}"))
                    }
                    _ => Ok(()),
                },
            ];
            if let Some(Err(msg)) = checks.into_iter().find(Result::is_err) {
                return self.err(at(name), &f, msg);
            }
            p.lambda = t.lambda.unwrap_or(p.lambda);
            p.bias_z = t.bias_z.unwrap_or(p.bias_z);
            p.bias_ratio = t.bias_ratio.unwrap_or(p.bias_ratio);
            p.rms_factor = t.rms_factor.unwrap_or(p.rms_factor);
            p.lsb = t.lsb.unwrap_or(p.lsb);
            p.subpixel_bits = t.subpixel_bits.unwrap_or(p.subpixel_bits);
            if let Some(e) = e2e {
                p.end_to_end.rel_l2 = e.rel_l2.unwrap_or(p.end_to_end.rel_l2);
                p.end_to_end.cosine = e.cosine.unwrap_or(p.end_to_end.cosine);
            }
        }
        Ok(out)
    }

    fn known(
        &self,
        name: &Spanned<String>,
        field: &str,
        produced: &[&str],
    ) -> Result<String, DocumentError> {
        if self.tensors.contains_key(name.as_str()) || produced.contains(&name.as_str()) {
            Ok(name.to_string())
        } else {
            self.err(
                at(name),
                field,
                format!(
                    "tensor `{}` is not declared in `tensors` nor produced before this point",
                    name.as_str()
                ),
            )
        }
    }

    fn stage(
        &self,
        field: &str,
        s: RawStage,
        defaults: &BTreeMap<Tier, TierParams>,
        earlier: &[Stage],
    ) -> Result<Stage, DocumentError> {
        let earlier_outputs: Vec<&str> = earlier
            .iter()
            .flat_map(|st| st.outputs.iter().map(String::as_str))
            .collect();
        let inputs = s
            .inputs
            .iter()
            .enumerate()
            .map(|(i, n)| self.known(n, &format!("{field}.inputs[{i}]"), &earlier_outputs))
            .collect::<Result<Vec<_>, _>>()?;
        let mut outputs = Vec::new();
        for (i, o) in s.outputs.iter().enumerate() {
            let f = format!("{field}.outputs[{i}]");
            match self.tensors.get(o.as_str()) {
                Some(t) if t.source == TensorSource::Golden => outputs.push(o.to_string()),
                Some(_) => return self.err(at(o), &f, format!("stage output `{}` must be declared with `source: golden` (its expected values)", o.as_str())),
                None => return self.err(at(o), &f, format!("stage output `{}` is not declared in `tensors`", o.as_str())),
            }
        }
        // The graph: each node reads stage inputs or earlier nodes' outputs.
        let mut graph = Vec::new();
        let mut available: Vec<String> = inputs.clone();
        for (j, n) in s.graph.iter().enumerate() {
            let nf = format!("{field}.graph[{j}]");
            let (name, version) = split_kernel(&n.op);
            let op = match Op::lookup(name, version) {
                Ok(op) => op,
                Err(e) => return self.err(at(&n.op), &format!("{nf}.op"), e.to_string()),
            };
            let mut node_inputs = Vec::new();
            for (k, i) in n.inputs.iter().enumerate() {
                // The verdict on a rasterizer's output measures its own
                // inputs, which a fused stage keeps only when they are the
                // stage's (docs/error-model.md, "Discrete outputs").
                if op == Op::Rasterize && !inputs.iter().any(|a| a == i.as_str()) {
                    return self.err(
                        at(i),
                        &format!("{nf}.inputs[{k}]"),
                        format!(
                            "`{}`: vsdk.rasterize reads the stage's inputs only (compute positions in an earlier stage)",
                            i.as_str()
                        ),
                    );
                }
                if !available.iter().any(|a| a == i.as_str()) {
                    return self.err(
                        at(i),
                        &format!("{nf}.inputs[{k}]"),
                        format!(
                            "`{}` is neither a stage input nor an output of an earlier node",
                            i.as_str()
                        ),
                    );
                }
                node_inputs.push(i.to_string());
            }
            if n.outputs.len() != 1 {
                return self.err(
                    at(&n.op),
                    &format!("{nf}.outputs"),
                    format!("{} has exactly one output", op.name()),
                );
            }
            let output = n.outputs[0].to_string();
            if available.contains(&output) {
                return self.err(
                    at(&n.outputs[0]),
                    &format!("{nf}.outputs[0]"),
                    format!("`{output}` is already defined in this stage"),
                );
            }
            // Intermediates are local to their stage, and never stand for a
            // declared tensor (which another stage may read or produce).
            if self.tensors.contains_key(&output) && !outputs.contains(&output) {
                return self.err(
                    at(&n.outputs[0]),
                    &format!("{nf}.outputs[0]"),
                    format!(
                        "`{output}` is a declared tensor but not an output of this stage: name the intermediate otherwise"
                    ),
                );
            }
            let mut attrs = Attrs::new();
            for (k, v) in &n.attrs {
                let value = match &**v {
                    RawAttr::Int(i) => AttrValue::Int(*i),
                    RawAttr::Float(f) => AttrValue::Float(*f),
                    RawAttr::Str(s) => AttrValue::Str(s.clone()),
                    RawAttr::Ints(x) => AttrValue::Ints(x.clone()),
                    RawAttr::Floats(x) => AttrValue::Floats(x.clone()),
                };
                attrs = attrs.with(k, value);
            }
            available.push(output.clone());
            graph.push(GraphNode {
                op,
                attrs,
                inputs: node_inputs,
                output,
                at: at(&n.op),
            });
        }
        // A rasterizer's output is judged by the verdict on its ids, which
        // nothing inside the stage would see (docs/error-model.md, 6a).
        if let Some(n) = graph.iter().find(|n| {
            n.op == Op::Rasterize
                && (!outputs.contains(&n.output)
                    || graph.iter().any(|m| m.inputs.contains(&n.output)))
        }) {
            return self.err(
                n.at.clone(),
                &format!("{field}.graph"),
                format!(
                    "`{}`: a vsdk.rasterize output is an output of its stage that no node of the stage reads (interpolate in the next stage)",
                    n.output
                ),
            );
        }
        for (i, o) in outputs.iter().enumerate() {
            if !graph.iter().any(|n| &n.output == o) {
                return self.err(
                    at(&s.outputs[i]),
                    &format!("{field}.outputs[{i}]"),
                    format!("no node of the graph produces `{o}`"),
                );
            }
        }
        if graph.is_empty() {
            return self.err(
                at(&s.stage),
                &format!("{field}.graph"),
                "a stage needs a graph (at least one node)",
            );
        }
        let kernel = match &s.kernel {
            None => None,
            Some(k) => match split_kernel(k) {
                (n, v) if v > 0 && !n.is_empty() => Some((n.to_string(), v)),
                _ => {
                    return self.err(
                        at(k),
                        &format!("{field}.kernel"),
                        format!(
                            "`{}`: expected `name@version` with a version >= 1",
                            k.as_str()
                        ),
                    )
                }
            },
        };
        let mismatch_fraction = match &s.mismatch_fraction {
            None => 0.0,
            Some(m) if (0.0..=1.0).contains(&**m) => **m,
            Some(m) => {
                return self.err(
                    at(m),
                    &format!("{field}.mismatch_fraction"),
                    "must be between 0 and 1",
                )
            }
        };
        let nan = match s.nan.as_ref().map(|n| n.as_str()) {
            None | Some("fail") => NanPolicy::Fail,
            Some("allow") => NanPolicy::Allow,
            Some(other) => {
                return self.err(
                    at(s.nan.as_ref().expect("matched Some")),
                    &format!("{field}.nan"),
                    format!("`{other}`: expected `fail` or `allow`"),
                )
            }
        };
        let precision = match &s.precision {
            None => None,
            Some(p) => match p.as_str() {
                "float32" => Some(Tier::Fp32),
                "float16" => Some(Tier::Fp16),
                "bfloat16" => Some(Tier::Bf16),
                other => {
                    return self.err(
                        at(p),
                        &format!("{field}.precision"),
                        format!("`{other}`: expected float32, float16 or bfloat16"),
                    )
                }
            },
        };
        let mut verify = Vec::new();
        for (i, inv) in s.verify.iter().enumerate() {
            let v = match &**inv {
                RawInvariant::Finite(t) => Invariant::Finite { tensor: t.clone() },
                RawInvariant::Range { tensor, min, max } => Invariant::Range {
                    tensor: tensor.clone(),
                    min: *min,
                    max: *max,
                },
                RawInvariant::SumsToOne { tensor, axis, tol } => Invariant::SumsToOne {
                    tensor: tensor.clone(),
                    axis: *axis,
                    tol: *tol,
                },
                RawInvariant::NonzeroFraction { tensor, min, max } => Invariant::NonzeroFraction {
                    tensor: tensor.clone(),
                    min: *min,
                    max: *max,
                },
            };
            if !outputs.iter().any(|o| o == v.tensor()) {
                return self.err(
                    at(inv),
                    &format!("{field}.verify[{i}]"),
                    format!("`{}` is not an output of this stage", v.tensor()),
                );
            }
            verify.push(v);
        }
        Ok(Stage {
            name: s.stage.to_string(),
            algorithm: s.algorithm,
            implementation: s.implementation,
            paper: s.paper,
            inputs,
            outputs,
            graph,
            kernel,
            tolerances: self.tolerances(&format!("{field}.tolerances"), &s.tolerances, defaults)?,
            mismatch_fraction,
            nan,
            precision,
            verify,
            notes: s.notes,
            token_grid: self.token_grid,
            at: at(&s.stage),
        })
    }
}

/// `vsdk.linear@1` → ("vsdk.linear", 1); no `@`: version 1.
fn split_kernel(s: &str) -> (&str, u32) {
    match s.rsplit_once('@') {
        Some((name, v)) => (name, v.parse().unwrap_or(0)),
        None => (s, 1),
    }
}
