/**
 * Reproducible pseudo-random text (xorshift32, no Math.random): the pathological inputs the
 * tokenizer tests and the calibration bench price (base64, hex, CJK runs). `seed` is used as is
 * (0 would stay 0: callers pass a non-zero one, or the default).
 */
export function randomText(length: number, alphabet: string, seed = 0x9e3779b9): string {
  let x = seed | 0;
  const out: string[] = [];
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out.push(alphabet[(x >>> 0) % alphabet.length]!);
  }
  return out.join('');
}
