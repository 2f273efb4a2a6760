//! Per-pixel compositing of N aligned rasters (`raster_composite`): the caller reads the same
//! block of rows from every input (already on the first input's grid) and [`composite`] reduces
//! them pixel by pixel into one output block.
//!
//! Nodata is per input and per pixel: a pixel that is nodata in one input (NaN, or that input's
//! nodata value) is left out of that pixel's statistic and does not mask the other inputs. A
//! pixel where no input is valid gets the output nodata value — except for
//! [`Statistic::Count`], which writes 0 there (the number of valid inputs).
//!
//! | statistic | value over the valid inputs of a pixel |
//! |---|---|
//! | max, min | largest / smallest value |
//! | mean | arithmetic mean (accumulated in `f64`) |
//! | median | middle value; for an even count the mean of the two middle values (numpy `nanmedian`) |
//! | count | number of valid inputs |
//! | sum | sum (accumulated in `f64`) |
//!
//! Results are cast to `f32` at the end (a sum beyond `f32::MAX` becomes infinite). If
//! `out_nodata` can also be a genuine result (e.g. 0 for `sum`), the caller should choose
//! another value.

use super::AggregationError;

statistic_names! {
    /// A per-pixel compositing statistic.
    pub enum Statistic ("composite statistic") {
        Max = "max",
        Min = "min",
        Mean = "mean",
        Median = "median",
        Count = "count",
        Sum = "sum",
    }
}

/// True when `v` is a valid value for an input with nodata value `nodata`.
#[inline]
fn valid(v: f32, nodata: Option<f64>) -> bool {
    !v.is_nan() && nodata.is_none_or(|n| f64::from(v) != n)
}

/// Composites blocks of pixels, with scratch buffers kept between calls (one per thread; a
/// loop over row blocks reuses one).
#[derive(Debug, Clone, Default)]
pub struct Compositor {
    counts: Vec<u32>,
    sums: Vec<f64>,
    buffer: Vec<f32>,
}

impl Compositor {
    /// Composites `inputs` (each the same block of pixels of one input, all as long as `out`)
    /// into `out`. `nodata[i]` is input `i`'s nodata value (NaN is always nodata); pixels with
    /// no valid input get `out_nodata` (0 for [`Statistic::Count`]).
    pub fn composite(
        &mut self,
        inputs: &[&[f32]],
        nodata: &[Option<f64>],
        statistic: Statistic,
        out_nodata: f32,
        out: &mut [f32],
    ) -> Result<(), AggregationError> {
        if inputs.is_empty() {
            return Err(AggregationError::NoInputs);
        }
        if nodata.len() != inputs.len() {
            return Err(AggregationError::LengthMismatch {
                what: "composite nodata values vs inputs",
                expected: inputs.len(),
                got: nodata.len(),
            });
        }
        if let Some(bad) = inputs.iter().find(|input| input.len() != out.len()) {
            return Err(AggregationError::LengthMismatch {
                what: "composite input vs output block",
                expected: out.len(),
                got: bad.len(),
            });
        }
        self.counts.clear();
        self.counts.resize(out.len(), 0);
        match statistic {
            Statistic::Median => self.median(inputs, nodata, out_nodata, out),
            Statistic::Max | Statistic::Min => {
                self.extreme(statistic == Statistic::Max, inputs, nodata, out_nodata, out);
            }
            Statistic::Count => {
                for (input, &nd) in inputs.iter().zip(nodata) {
                    for (c, &v) in self.counts.iter_mut().zip(input.iter()) {
                        *c += u32::from(valid(v, nd));
                    }
                }
                for (o, &c) in out.iter_mut().zip(&self.counts) {
                    *o = c as f32;
                }
            }
            Statistic::Mean | Statistic::Sum => {
                self.sums.clear();
                self.sums.resize(out.len(), 0.0);
                // Input-major loops: each input is read sequentially.
                for (input, &nd) in inputs.iter().zip(nodata) {
                    for ((c, s), &v) in self
                        .counts
                        .iter_mut()
                        .zip(self.sums.iter_mut())
                        .zip(input.iter())
                    {
                        if valid(v, nd) {
                            *c += 1;
                            *s += f64::from(v);
                        }
                    }
                }
                let mean = statistic == Statistic::Mean;
                for ((o, &c), &s) in out.iter_mut().zip(&self.counts).zip(&self.sums) {
                    *o = if c == 0 {
                        out_nodata
                    } else if mean {
                        (s / f64::from(c)) as f32
                    } else {
                        s as f32
                    };
                }
            }
        }
        Ok(())
    }

    /// The exact (`f64`) values of the last [`Statistic::Sum`] or [`Statistic::Mean`]
    /// composite before their cast to `f32` (`None` where no input was valid), so that the
    /// caller can tell the values Float32 changes; empty after any other statistic.
    pub fn wide_results(&self, statistic: Statistic) -> Vec<Option<f64>> {
        if !matches!(statistic, Statistic::Sum | Statistic::Mean) {
            return Vec::new();
        }
        self.counts
            .iter()
            .zip(&self.sums)
            .map(|(&c, &s)| {
                (c > 0).then(|| {
                    if statistic == Statistic::Mean {
                        s / f64::from(c)
                    } else {
                        s
                    }
                })
            })
            .collect()
    }

    /// The largest (`max`) or smallest valid value of every pixel.
    fn extreme(
        &mut self,
        max: bool,
        inputs: &[&[f32]],
        nodata: &[Option<f64>],
        out_nodata: f32,
        out: &mut [f32],
    ) {
        // Start from the identity of max / min; `counts` records which pixels saw a value.
        out.fill(if max {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        });
        for (input, &nd) in inputs.iter().zip(nodata) {
            let pixels = out.iter_mut().zip(self.counts.iter_mut()).zip(input.iter());
            if max {
                for ((o, c), &v) in pixels {
                    if valid(v, nd) {
                        *o = o.max(v);
                        *c = 1;
                    }
                }
            } else {
                for ((o, c), &v) in pixels {
                    if valid(v, nd) {
                        *o = o.min(v);
                        *c = 1;
                    }
                }
            }
        }
        for (o, &c) in out.iter_mut().zip(&self.counts) {
            if c == 0 {
                *o = out_nodata;
            }
        }
    }

    fn median(
        &mut self,
        inputs: &[&[f32]],
        nodata: &[Option<f64>],
        out_nodata: f32,
        out: &mut [f32],
    ) {
        let buffer = &mut self.buffer;
        for (i, o) in out.iter_mut().enumerate() {
            buffer.clear();
            for (input, &nd) in inputs.iter().zip(nodata) {
                if let Some(&v) = input.get(i) {
                    if valid(v, nd) {
                        // Insertion into the sorted buffer (few inputs; valid values are not NaN).
                        buffer.push(v);
                        let mut at = buffer.len() - 1;
                        while at > 0 && buffer[at - 1] > v {
                            buffer[at] = buffer[at - 1];
                            at -= 1;
                        }
                        buffer[at] = v;
                    }
                }
            }
            *o = middle(buffer).unwrap_or(out_nodata);
        }
    }
}

/// Median of sorted `values`: the middle value, or the mean of the two middle values for an
/// even count.
fn middle(values: &[f32]) -> Option<f32> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    if n % 2 == 1 {
        return values.get(n / 2).copied();
    }
    let a = f64::from(*values.get(n / 2 - 1)?);
    let b = f64::from(*values.get(n / 2)?);
    Some((0.5 * (a + b)) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(inputs: &[&[f32]], nodata: &[Option<f64>], statistic: Statistic) -> Vec<f32> {
        let mut out = vec![0.0; inputs[0].len()];
        Compositor::default()
            .composite(inputs, nodata, statistic, -1.0, &mut out)
            .unwrap();
        out
    }

    /// 2x2 pixels, 3 inputs; input 0 has nodata 0, input 1 nodata -9999, input 2 none (NaN
    /// only). Valid values per pixel:
    /// p0: 1, 4, 7 · p1: 5, 8 (input 0 nodata) · p2: 3 (input 1 nodata, input 2 NaN) · p3: none.
    #[test]
    fn two_by_two_three_inputs() {
        let a = [1.0, 0.0, 3.0, 0.0];
        let b = [4.0, 5.0, -9999.0, -9999.0];
        let c = [7.0, 8.0, f32::NAN, f32::NAN];
        let inputs: [&[f32]; 3] = [&a, &b, &c];
        let declared = [Some(0.0), Some(-9999.0), None];
        // Without nodata declarations 0 and -9999 are data.
        let none = [None, None, None];
        // (nodata declarations, statistic, the composite of the four pixels)
        type Case<'a> = (&'a [Option<f64>], Statistic, [f32; 4]);
        let cases: [Case; 8] = [
            (&declared, Statistic::Max, [7.0, 8.0, 3.0, -1.0]),
            (&declared, Statistic::Min, [1.0, 5.0, 3.0, -1.0]),
            (&declared, Statistic::Mean, [4.0, 6.5, 3.0, -1.0]),
            (&declared, Statistic::Median, [4.0, 6.5, 3.0, -1.0]),
            (&declared, Statistic::Count, [3.0, 2.0, 1.0, 0.0]),
            (&declared, Statistic::Sum, [12.0, 13.0, 3.0, -1.0]),
            (&none, Statistic::Count, [3.0, 3.0, 2.0, 2.0]),
            (&none, Statistic::Min, [1.0, 0.0, -9999.0, -9999.0]),
        ];
        for (nodata, statistic, expected) in cases {
            assert_eq!(run(&inputs, nodata, statistic), expected, "{statistic:?}");
        }
    }

    #[test]
    fn median_odd_even() {
        let inputs: [&[f32]; 4] = [&[3.0, 1.0], &[1.0, 2.0], &[2.0, 10.0], &[100.0, f32::NAN]];
        let nodata = [None; 4];
        // Pixel 0: 1 2 3 100 → (2 + 3) / 2; pixel 1: 1 2 10 → 2.
        assert_eq!(run(&inputs, &nodata, Statistic::Median), vec![2.5, 2.0]);
        let inputs: [&[f32]; 2] = [&[f32::MAX], &[f32::MAX]];
        assert_eq!(
            run(&inputs, &[None, None], Statistic::Median),
            vec![f32::MAX]
        );
        assert_eq!(run(&inputs, &[None, None], Statistic::Mean), vec![f32::MAX]);
        assert_eq!(
            run(&inputs, &[None, None], Statistic::Sum),
            vec![f32::INFINITY]
        );
    }

    #[test]
    fn negative_values_and_infinities() {
        let inputs: [&[f32]; 2] = [&[-5.0, f32::NEG_INFINITY], &[-7.0, 1.0]];
        assert_eq!(run(&inputs, &[None, None], Statistic::Max), vec![-5.0, 1.0]);
        assert_eq!(
            run(&inputs, &[None, None], Statistic::Min),
            vec![-7.0, f32::NEG_INFINITY]
        );
    }

    #[test]
    fn nan_output_nodata() {
        let inputs: [&[f32]; 2] = [&[f32::NAN, 2.0], &[f32::NAN, f32::NAN]];
        for statistic in Statistic::ALL {
            let mut out = vec![0.0; 2];
            Compositor::default()
                .composite(&inputs, &[None, None], statistic, f32::NAN, &mut out)
                .unwrap();
            if statistic == Statistic::Count {
                assert_eq!(out, vec![0.0, 1.0]);
            } else {
                assert!(out[0].is_nan(), "{statistic}");
                assert_eq!(out[1], 2.0, "{statistic}");
            }
        }
    }

    #[test]
    fn compositor_reuse_matches_fresh_calls() {
        let a = [1.0, 0.0, 3.0, 0.0, 9.0];
        let b = [4.0, 5.0, -9999.0, -9999.0, 2.0];
        let c = [7.0, 8.0, f32::NAN, f32::NAN, 5.0];
        let inputs: [&[f32]; 3] = [&a, &b, &c];
        let nodata = [Some(0.0), Some(-9999.0), None];
        let mut compositor = Compositor::default();
        for statistic in Statistic::ALL {
            for len in [5, 2, 4] {
                let block: Vec<&[f32]> = inputs.iter().map(|i| &i[..len]).collect();
                let mut out = vec![123.0; len];
                compositor
                    .composite(&block, &nodata, statistic, -1.0, &mut out)
                    .unwrap();
                assert_eq!(out, run(&block, &nodata, statistic), "{statistic}");
            }
        }
    }

    #[test]
    fn errors_and_names() {
        let mut out = vec![0.0; 2];
        assert_eq!(
            Compositor::default().composite(&[], &[], Statistic::Max, 0.0, &mut out),
            Err(AggregationError::NoInputs)
        );
        let a = [1.0f32, 2.0];
        let short = [1.0f32];
        assert!(matches!(
            Compositor::default().composite(
                &[&a, &short],
                &[None, None],
                Statistic::Max,
                0.0,
                &mut out
            ),
            Err(AggregationError::LengthMismatch { .. })
        ));
        assert!(matches!(
            Compositor::default().composite(&[&a], &[None, None], Statistic::Max, 0.0, &mut out),
            Err(AggregationError::LengthMismatch { .. })
        ));
        for s in Statistic::ALL {
            assert_eq!(s.as_str().parse::<Statistic>().unwrap(), s);
        }
        assert!("mode".parse::<Statistic>().is_err());
    }
}
