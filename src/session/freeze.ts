/**
 * Freezes a value and everything it holds: logged events and cached messages are immutable.
 * Runs on every event of a reopened log, so it walks keys in place rather than collecting
 * `Object.values` arrays (a fifth of the work of reopening went to that garbage).
 */
export function deepFreeze<T>(value: T): T {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return value;
  Object.freeze(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (v !== null && typeof v === 'object') deepFreeze(v);
    }
  } else {
    const o = value as Record<string, unknown>;
    for (const k in o) {
      if (!Object.hasOwn(o, k)) continue;
      const v = o[k];
      if (v !== null && typeof v === 'object') deepFreeze(v);
    }
  }
  return value;
}
