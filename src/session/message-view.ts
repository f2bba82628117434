/**
 * A read-only array view of the first `length` items of a backing array that only grows.
 *
 * deriveMessages() hands one out per surface generation: an append adds to the backing array
 * and makes a new view (O(1)), instead of copying and freezing the whole array (O(n)) each
 * time. A view is a stable snapshot (items past its length are invisible) and refuses every
 * write (TypeError in strict code); a replace makes the surface copy its backing array before
 * it edits it, so earlier views keep what they showed. It behaves as an array for reading
 * (indexing, iteration, spread, array methods, JSON, Array.isArray), but, being a Proxy, it
 * is not `Object.isFrozen` and cannot be structured-cloned: spread it into an array first.
 */

const isIndex = (key: string): boolean => {
  const c = key.charCodeAt(0);
  return c >= 48 && c <= 57 && String(Number(key) >>> 0) === key;
};

const refuse = (): never => {
  throw new TypeError('a derived message array is read-only: copy it ([...messages]) to edit it');
};

export function readOnlyPrefix<T>(backing: T[], length: number): readonly T[] {
  // Spread and for…of read the backing array directly, not one trap per item.
  const values = function* (): IterableIterator<T> {
    for (let i = 0; i < length; i++) yield backing[i]!;
  };
  const handler: ProxyHandler<T[]> = {
    get(target, key, receiver) {
      if (typeof key === 'string') {
        // An index string converts to its number; any other key is NaN or not an integer.
        const i = +key;
        if (i >= 0 && Number.isInteger(i) && isIndex(key)) return i < length ? target[i] : undefined;
        if (key === 'length') return length;
      } else if (key === Symbol.iterator) return values;
      return Reflect.get(target, key, receiver);
    },
    has(target, key) {
      if (typeof key === 'string' && isIndex(key)) return Number(key) < length;
      return Reflect.has(target, key);
    },
    ownKeys() {
      const keys: string[] = [];
      for (let i = 0; i < length; i++) keys.push(String(i));
      keys.push('length');
      return keys;
    },
    getOwnPropertyDescriptor(target, key) {
      if (key === 'length') return { value: length, writable: true, enumerable: false, configurable: false };
      if (typeof key === 'string' && isIndex(key)) {
        return Number(key) < length ? { value: target[Number(key)], writable: false, enumerable: true, configurable: true } : undefined;
      }
      return Reflect.getOwnPropertyDescriptor(target, key);
    },
    set: refuse,
    defineProperty: refuse,
    deleteProperty: refuse,
    setPrototypeOf: refuse,
    preventExtensions: refuse,
  };
  return new Proxy(backing, handler);
}
