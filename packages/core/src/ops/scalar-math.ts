/** Scalar float64 functions the ops need that JavaScript's Math lacks (the reference math of the op registry; backend-cpu re-exports them). */

const TWO_OVER_SQRT_PI = 1.1283791670955126; // 2 / sqrt(pi)
const INV_SQRT_PI = 0.5641895835477563; // 1 / sqrt(pi)

/**
 * erf(x) = 2/sqrt(pi) e^{-x^2} sum_n 2^n x^{2n+1} / (2n+1)!!  (all terms positive: no cancellation).
 * Used for |x| < 2.5, where it converges in < 80 terms.
 */
function erfSeries(x: number): number {
  const x2 = x * x;
  let term = x;
  let sum = x;
  for (let n = 0; n < 200; n++) {
    term *= (2 * x2) / (2 * n + 3);
    sum += term;
    if (Math.abs(term) <= Math.abs(sum) * 1e-17) break;
  }
  return TWO_OVER_SQRT_PI * Math.exp(-x2) * sum;
}

/**
 * erfc(x) for x >= 2.5 from Laplace's continued fraction
 * erfc(x) = e^{-x^2}/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated with modified Lentz.
 */
function erfcContinuedFraction(x: number): number {
  const tiny = 1e-300;
  let f = x;
  let C = f;
  let D = 0;
  for (let n = 1; n < 500; n++) {
    const a = n / 2;
    D = x + a * D;
    if (D === 0) D = tiny;
    D = 1 / D;
    C = x + a / C;
    if (C === 0) C = tiny;
    const delta = C * D;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return (INV_SQRT_PI * Math.exp(-x * x)) / f;
}

/** The error function to about 1e-16 (relative) over the whole real line. */
export function erf(x: number): number {
  if (Number.isNaN(x)) return NaN;
  const a = Math.abs(x);
  if (a < 2.5) return erfSeries(x);
  if (a > 6) return Math.sign(x); // erfc(6) = 2e-17, below half an ulp of 1
  const r = 1 - erfcContinuedFraction(a);
  return x < 0 ? -r : r;
}

/** The complementary error function, accurate in the tails (relative error about 1e-15). */
export function erfc(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x >= 2.5) return x > 27.3 ? 0 : erfcContinuedFraction(x);
  if (x <= -2.5) return 2 - erfcContinuedFraction(-x);
  return 1 - erfSeries(x);
}

export function silu(x: number): number {
  return x / (1 + Math.exp(-x));
}

/** Exact GELU: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)). */
export function geluErf(x: number): number {
  return 0.5 * x * (1 + erf(x * Math.SQRT1_2));
}

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);

/** GELU's tanh approximation (approximate='tanh'). */
export function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
}

/** softplus with PyTorch's beta and threshold: x where beta*x > threshold, else log1p(exp(beta*x)) / beta. */
export function softplus(x: number, beta = 1, threshold = 20): number {
  const bx = beta * x;
  return bx > threshold ? x : Math.log1p(Math.exp(bx)) / beta;
}

/** log(sigmoid(x)) = -softplus(-x), stable for large |x|. */
export function logSigmoid(x: number): number {
  return x < 0 ? x - Math.log1p(Math.exp(x)) : -Math.log1p(Math.exp(-x));
}

export function sigmoid(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

/** quick_gelu (CLIP): x * sigmoid(1.702 x). */
export function quickGelu(x: number): number {
  return x * sigmoid(1.702 * x);
}
