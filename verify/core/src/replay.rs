//! A pack streamed through a fixed-size state and one frame buffer: frames
//! assembled from chunks of any size, their order checked, each output's
//! elements judged as the device's bytes arrive, the pack's SHA-256 checked
//! at its end.

use crate::format::{self, DType, Frame, Header, Rules, EXPECTED_STRIDE, HEADER_LEN};
use crate::tally::{Tally, TopErrors, Verdict, BLOCK};
use crate::Error;
use sha2::{Digest, Sha256};

/// One output being judged: the streaming form of the host's `judge`.
#[derive(Clone)]
pub struct Judge {
    rules: Rules,
    dtype: DType,
    elements: u64,
    seen: u64,
    block: Tally,
    total: Tally,
    top: TopErrors,
    sha: Sha256,
}

impl Judge {
    /// `elements` elements of `dtype` under `rules` (more than
    /// [`crate::tally::TOP`]` - 1` allowed past their bound is refused).
    pub fn new(dtype: DType, elements: u64, rules: Rules) -> Result<Judge, Error> {
        if rules.allowed_over >= crate::tally::TOP as u64 {
            return Err(Error::Unsupported(
                "more elements allowed past their bound than a device keeps",
            ));
        }
        Ok(Judge {
            rules,
            dtype,
            elements,
            seen: 0,
            block: Tally::default(),
            total: Tally::default(),
            top: TopErrors::new(),
            sha: Sha256::new(),
        })
    }

    /// The next element: the device's value and its reference, bound and σ.
    #[inline]
    pub fn element(&mut self, actual: f64, (r, b, s): (f64, f64, f64)) {
        let m = self
            .block
            .push(self.seen, (actual, r, b), Some(s), self.rules.nan);
        self.top.insert(m);
        self.seen += 1;
        if self.seen.is_multiple_of(BLOCK as u64) {
            self.total = self.total.then(core::mem::take(&mut self.block));
        }
    }

    /// The device's raw bytes of the next elements (whole elements), hashed
    /// and judged against `expected` ([`EXPECTED_STRIDE`] bytes each).
    pub fn bytes(&mut self, actual: &[u8], expected: &[u8]) -> Result<(), Error> {
        let size = self.dtype.size();
        if !actual.len().is_multiple_of(size)
            || actual.len() / size != expected.len() / EXPECTED_STRIDE
        {
            return Err(Error::Size(
                "output bytes do not match the expected elements",
            ));
        }
        if self.seen + (actual.len() / size) as u64 > self.elements {
            return Err(Error::TooMuchOutput);
        }
        self.sha.update(actual);
        for (a, x) in actual
            .chunks_exact(size)
            .zip(expected.chunks_exact(EXPECTED_STRIDE))
        {
            let f = |k: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&x[8 * k..8 * k + 8]);
                f64::from_le_bytes(w)
            };
            self.element(self.dtype.value(a), (f(0), f(1), f(2)));
        }
        Ok(())
    }

    /// Elements judged so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// The verdict once every element was judged.
    pub fn finish(&self) -> Result<Verdict, Error> {
        if self.seen != self.elements {
            return Err(Error::Incomplete);
        }
        let tally = self.total.then(self.block);
        let needed = self.top.nth_largest(self.rules.allowed_over as usize);
        let mut v = tally.verdict(self.elements, &self.rules, needed);
        v.sha256 = self.sha.clone().finalize().into();
        Ok(v)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    Header,
    Pack,
    /// A stage, or End once every stage came.
    StageOrEnd,
    /// An input chunk, or the stage's first output.
    InputOrOutput,
    /// The stage's next output.
    Output,
    /// Expected frames of the current output.
    Values,
    /// The device's output for the last Expected frame.
    DeviceOutput,
    Done,
    /// An error happened: nothing more is accepted (a verdict after it
    /// would rest on a pack or an output out of order).
    Failed,
}

#[derive(Clone, PartialEq)]
struct Input {
    id: [u8; 32],
    size: u64,
    seen: u64,
}

/// The reader's state: fixed size, no borrowed data (the frame buffer is
/// passed to each call).
#[derive(Clone)]
pub struct Replay {
    expect: Expect,
    header: [u8; HEADER_LEN],
    max_frame: u32,
    /// Bytes of the current frame (length prefix included) in the buffer.
    have: usize,
    hash: Sha256,
    frames: u32,
    stages_left: u32,
    inputs_left: u32,
    outputs_left: u32,
    /// The current input: its name, dtype, shape hash, size and the bytes
    /// seen (a later chunk may not change what the first one said).
    input: Option<Input>,
    judge: Option<Judge>,
    /// The last Expected frame's values: where in the buffer, how many.
    pending: (usize, usize),
}

impl Default for Replay {
    fn default() -> Self {
        Replay::new()
    }
}

impl Replay {
    pub fn new() -> Replay {
        Replay {
            expect: Expect::Header,
            header: [0; HEADER_LEN],
            max_frame: 0,
            have: 0,
            hash: Sha256::new(),
            frames: 0,
            stages_left: 0,
            inputs_left: 0,
            outputs_left: 0,
            input: None,
            judge: None,
            pending: (0, 0),
        }
    }

    /// The frame buffer the pack's header asks for (after the header was
    /// read): its largest frame and the length prefix.
    pub fn buffer_needed(&self) -> Option<usize> {
        (self.expect != Expect::Header).then_some(self.max_frame as usize + 4)
    }

    /// Whether the pack ended and checked out.
    pub fn done(&self) -> bool {
        self.expect == Expect::Done
    }

    /// Feeds pack bytes: consumes `chunk` up to the end of the next whole
    /// frame (or all of it) and returns how much it took, with that frame
    /// when one completed. After `Frame::Expected`, the device's output for
    /// those elements is due ([`Replay::output`]) before more pack bytes.
    pub fn feed<'f>(
        &mut self,
        buf: &'f mut [u8],
        chunk: &[u8],
    ) -> Result<(usize, Option<Frame<'f>>), Error> {
        let r = self.feed_inner(buf, chunk);
        if r.is_err() {
            self.expect = Expect::Failed;
        }
        r
    }

    fn check_buffer(&self, buf: &[u8]) -> Result<(), Error> {
        let needed = self.max_frame as usize + 4;
        if self.expect != Expect::Header && buf.len() < needed {
            return Err(Error::Buffer {
                needed,
                given: buf.len(),
            });
        }
        Ok(())
    }

    fn feed_inner<'f>(
        &mut self,
        buf: &'f mut [u8],
        chunk: &[u8],
    ) -> Result<(usize, Option<Frame<'f>>), Error> {
        self.check_buffer(buf)?;
        match self.expect {
            Expect::Failed => return Err(Error::Order("the pack already failed")),
            Expect::DeviceOutput => {
                return Err(Error::Order(
                    "pack bytes while the device's output for the last Expected frame is due",
                ))
            }
            Expect::Done => return Err(Error::Order("bytes after the pack's End frame")),
            Expect::Header => {
                let take = (HEADER_LEN - self.have).min(chunk.len());
                self.header[self.have..self.have + take].copy_from_slice(&chunk[..take]);
                self.have += take;
                if self.have == HEADER_LEN {
                    let h = Header::decode(&self.header)?;
                    let needed = h.max_frame as usize + 4;
                    if buf.len() < needed {
                        return Err(Error::Buffer {
                            needed,
                            given: buf.len(),
                        });
                    }
                    self.hash.update(self.header);
                    self.max_frame = h.max_frame;
                    self.have = 0;
                    self.expect = Expect::Pack;
                }
                return Ok((take, None));
            }
            _ => {}
        }
        // The length prefix, then the payload.
        let mut used = 0;
        if self.have < 4 {
            let take = (4 - self.have).min(chunk.len());
            buf[self.have..self.have + take].copy_from_slice(&chunk[..take]);
            self.have += take;
            used = take;
            if self.have < 4 {
                return Ok((used, None));
            }
            let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
            if len > self.max_frame {
                return Err(Error::FrameTooLong {
                    len,
                    limit: self.max_frame,
                });
            }
        }
        let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let take = (4 + len - self.have).min(chunk.len() - used);
        buf[self.have..self.have + take].copy_from_slice(&chunk[used..used + take]);
        self.have += take;
        used += take;
        if self.have < 4 + len {
            return Ok((used, None));
        }
        self.have = 0;
        let buf: &'f [u8] = buf;
        let (frame, rest) =
            postcard::take_from_bytes::<Frame>(&buf[4..4 + len]).map_err(|_| Error::Decode)?;
        if !rest.is_empty() {
            return Err(Error::Decode);
        }
        self.apply(&frame)?;
        if !matches!(frame, Frame::End { .. }) {
            self.hash.update(&buf[..4 + len]);
            self.frames = self
                .frames
                .checked_add(1)
                .ok_or(Error::Size("more frames than a pack holds"))?;
        }
        if let Frame::Expected { values, .. } = &frame {
            // `values` borrows the payload: where it starts in `buf`.
            let start = values.as_ptr() as usize - buf.as_ptr() as usize;
            self.pending = (start, values.len() / EXPECTED_STRIDE);
        }
        Ok((used, Some(frame)))
    }

    /// Checks `frame` may come now and moves the state on.
    fn apply(&mut self, frame: &Frame) -> Result<(), Error> {
        let order = Error::Order;
        match (self.expect, frame) {
            (Expect::Pack, Frame::Pack { stages, .. }) => {
                if *stages == 0 {
                    return Err(order("a pack of no stages"));
                }
                self.stages_left = *stages;
                self.expect = Expect::StageOrEnd;
            }
            (
                Expect::StageOrEnd,
                Frame::Stage {
                    inputs, outputs, ..
                },
            ) => {
                if self.stages_left == 0 {
                    return Err(order("more stages than the Pack frame declares"));
                }
                self.stages_left -= 1;
                self.inputs_left = *inputs;
                self.outputs_left = *outputs;
                self.input = None;
                self.expect = Expect::InputOrOutput;
            }
            (
                Expect::InputOrOutput,
                Frame::Input {
                    name,
                    dtype,
                    shape,
                    offset,
                    bytes,
                },
            ) => {
                let size = format::elements(shape)
                    .and_then(|n| n.checked_mul(dtype.size() as u64))
                    .ok_or(Error::Size("an input's size overflows"))?;
                // What the chunk says of its input: name, dtype and shape.
                let mut h = Sha256::new();
                h.update(name.as_bytes());
                h.update([0, *dtype as u8]);
                for d in shape {
                    h.update(d.to_le_bytes());
                }
                let id: [u8; 32] = h.finalize().into();
                let seen = match &self.input {
                    Some(cur) if cur.seen < cur.size => {
                        if cur.id != id {
                            return Err(order(
                                "an input chunk naming another input, dtype or shape before the current one ended",
                            ));
                        }
                        cur.seen
                    }
                    _ => {
                        if self.inputs_left == 0 {
                            return Err(order("more inputs than the Stage frame declares"));
                        }
                        if size == 0 {
                            return Err(Error::Size("an empty input"));
                        }
                        self.inputs_left -= 1;
                        0
                    }
                };
                if *offset != seen || bytes.is_empty() || seen + bytes.len() as u64 > size {
                    return Err(Error::Size("an input chunk out of place"));
                }
                self.input = Some(Input {
                    id,
                    size,
                    seen: seen + bytes.len() as u64,
                });
            }
            (
                Expect::InputOrOutput | Expect::Output,
                Frame::Output {
                    dtype,
                    shape,
                    rules,
                    ..
                },
            ) => {
                let inputs_done =
                    self.inputs_left == 0 && self.input.as_ref().is_none_or(|i| i.seen == i.size);
                if self.expect == Expect::InputOrOutput && !inputs_done {
                    return Err(order("an output before the stage's inputs ended"));
                }
                if self.outputs_left == 0 {
                    return Err(order("more outputs than the Stage frame declares"));
                }
                self.outputs_left -= 1;
                let n = format::elements(shape).ok_or(Error::Size("an output's size overflows"))?;
                if n == 0 {
                    return Err(Error::Size("an empty output"));
                }
                self.judge = Some(Judge::new(*dtype, n, *rules)?);
                self.expect = Expect::Values;
            }
            (Expect::Values, Frame::Expected { first, values }) => {
                let judge = self
                    .judge
                    .as_ref()
                    .ok_or(order("Expected without Output"))?;
                let k = (values.len() / EXPECTED_STRIDE) as u64;
                if !values.len().is_multiple_of(EXPECTED_STRIDE)
                    || *first != judge.seen()
                    || k == 0
                    || judge.seen() + k > judge.elements
                {
                    return Err(Error::Size("Expected values out of place"));
                }
                self.expect = Expect::DeviceOutput;
            }
            (Expect::StageOrEnd, Frame::End { frames, sha256 }) => {
                if self.stages_left != 0 || self.outputs_left != 0 {
                    return Err(order("the pack ends before its stages and outputs"));
                }
                if *frames != self.frames {
                    return Err(Error::Size("End's frame count"));
                }
                if *sha256 != <[u8; 32]>::from(self.hash.clone().finalize()) {
                    return Err(Error::Checksum);
                }
                self.expect = Expect::Done;
            }
            (_, Frame::Pack { .. }) => return Err(order("a second Pack frame")),
            (_, Frame::Stage { .. }) => return Err(order("a Stage inside an unfinished one")),
            (_, Frame::Input { .. }) => return Err(order("an Input outside a stage's inputs")),
            (_, Frame::Output { .. }) => return Err(order("an Output before the last ended")),
            (_, Frame::Expected { .. }) => return Err(order("Expected values without Output")),
            (_, Frame::End { .. }) => return Err(order("End before the last output ended")),
        }
        Ok(())
    }

    /// The device's bytes for the pending Expected frame (any chunking, whole
    /// elements per call). Returns the output's verdict once its last
    /// element was judged.
    pub fn output(&mut self, buf: &[u8], bytes: &[u8]) -> Result<Option<Verdict>, Error> {
        let r = self.output_inner(buf, bytes);
        if r.is_err() {
            self.expect = Expect::Failed;
        }
        r
    }

    fn output_inner(&mut self, buf: &[u8], bytes: &[u8]) -> Result<Option<Verdict>, Error> {
        self.check_buffer(buf)?;
        if self.expect != Expect::DeviceOutput {
            return Err(Error::Order(
                "device output without pending Expected values",
            ));
        }
        let judge = self.judge.as_mut().ok_or(Error::Order("no output"))?;
        let size = judge.dtype.size();
        let (start, k) = self.pending;
        // (Whole elements: `Judge::bytes` checks.)
        let n = bytes.len() / size;
        if n > k {
            return Err(Error::TooMuchOutput);
        }
        judge.bytes(bytes, &buf[start..start + n * EXPECTED_STRIDE])?;
        self.pending = (start + n * EXPECTED_STRIDE, k - n);
        if k > n {
            return Ok(None);
        }
        if judge.seen() < judge.elements {
            self.expect = Expect::Values;
            return Ok(None);
        }
        let verdict = judge.finish()?;
        self.judge = None;
        self.expect = if self.outputs_left > 0 {
            Expect::Output
        } else {
            Expect::StageOrEnd
        };
        Ok(Some(verdict))
    }
}
