//! A command's standard input: bytes already here, plus (for a stream from the host) a
//! blocking source that yields more until end of input. The shell reading its script and the
//! commands it runs share one `Input`, as they share fd 0 on a phone.
use std::collections::VecDeque;

/// Most bytes one `Input` hands out in total; the rest reads as end of input.
pub const MAX_STDIN: usize = 16 << 20;

/// Where more input comes from. `next_chunk` blocks until bytes arrive and returns `None` at
/// end of input; it enforces its own deadline (an idle host reads as end of input).
pub trait Source: Send {
    fn next_chunk(&mut self) -> Option<Vec<u8>>;
}

#[derive(Default)]
pub struct Input {
    buf: VecDeque<u8>,
    source: Option<Box<dyn Source>>,
    /// Bytes taken from the source so far (bounded by `MAX_STDIN`).
    taken: usize,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input")
            .field("buffered", &self.buf.len())
            .field("open", &self.source.is_some())
            .finish()
    }
}

impl Input {
    /// No input: reads end at once.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Exactly these bytes.
    pub fn bytes(data: impl Into<Vec<u8>>) -> Self {
        Self {
            buf: data.into().into(),
            ..Self::default()
        }
    }

    /// Whatever `source` yields until it ends.
    pub fn source(source: Box<dyn Source>) -> Self {
        Self {
            source: Some(source),
            ..Self::default()
        }
    }

    /// Pulls one more chunk from the source; false at end of input.
    fn fill(&mut self) -> bool {
        let Some(src) = self.source.as_mut() else {
            return false;
        };
        match src.next_chunk() {
            Some(chunk) if self.taken < MAX_STDIN => {
                let room = MAX_STDIN - self.taken;
                let chunk = &chunk[..chunk.len().min(room)];
                self.taken += chunk.len();
                self.buf.extend(chunk);
                true
            }
            _ => {
                self.source = None;
                false
            }
        }
    }

    /// The next line without its `\n` (the last line may lack one); `None` at end of input.
    pub fn line(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let mut line: Vec<u8> = self.buf.drain(..=i).collect();
                line.pop();
                return Some(line);
            }
            if !self.fill() {
                return (!self.buf.is_empty()).then(|| self.buf.drain(..).collect());
            }
        }
    }

    /// Everything up to end of input.
    pub fn read_to_end(&mut self) -> Vec<u8> {
        while self.fill() {}
        self.buf.drain(..).collect()
    }

    /// Up to `n` bytes: fewer only at end of input.
    pub fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n && self.fill() {}
        let n = n.min(self.buf.len());
        self.buf.drain(..n).collect()
    }

    /// True if nothing more will come (and nothing is buffered). Blocks until that is known.
    pub fn at_end(&mut self) -> bool {
        self.buf.is_empty() && !self.fill()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Chunks(Vec<Vec<u8>>);

    impl Source for Chunks {
        fn next_chunk(&mut self) -> Option<Vec<u8>> {
            (!self.0.is_empty()).then(|| self.0.remove(0))
        }
    }

    #[test]
    fn lines_span_chunks_and_the_rest_reads_to_end() {
        let mut i = Input::source(Box::new(Chunks(vec![
            b"ec".to_vec(),
            b"ho one\nca".to_vec(),
            b"t\nx\ny".to_vec(),
        ])));
        assert_eq!(i.line().as_deref(), Some(&b"echo one"[..]));
        assert_eq!(i.line().as_deref(), Some(&b"cat"[..]));
        assert_eq!(i.read_to_end(), b"x\ny");
        assert!(i.at_end());
        assert_eq!(i.line(), None);
    }
}
