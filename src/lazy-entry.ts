/**
 * The package's root entry as built: `import('xcompact')` loads none of the library (zod,
 * xstate, the charts, the services, the session model) until one of its exports is first used.
 * tsup.config.ts builds dist/index.(c)js from src/index.ts's list of exports
 * (scripts/lazy-root.ts): each value becomes `lazyExports(load)(name)`, and `load` requires
 * dist/index-full.(c)js, the whole entry (src/index-full.ts), synchronously on that first use
 * (CommonJS require, or require of the ES module on Node ≥ 20.19). Types are those of
 * src/index.ts, unchanged; the sources, the tests and the other entries never go through here.
 *
 * Every value the root entry exports is a function or a class, so each stands in as a proxy
 * over a plain function: a call, `new`, a static member, `instanceof` (an error thrown by the
 * library is an instance of the proxied class) and `extends` all reach the real value.
 */
type Constructor = new (...args: unknown[]) => object;

export function lazyExports(load: () => Record<string, unknown>): (name: string) => unknown {
  let full: Record<string, unknown> | undefined;
  return (name) => {
    let real: unknown;
    const get = (): object => {
      if (real === undefined) {
        full ??= load();
        real = full[name];
        if (typeof real !== 'function') throw new TypeError(`xcompact: the root entry's export ${name} is not a function or a class (${typeof real})`);
      }
      return real as object;
    };
    // A plain function, not a class: its `prototype` is writable, so the proxy may answer the real one.
    const placeholder = function () {} as unknown as object;
    const proxy: object = new Proxy(placeholder, {
      apply: (_t, thisArg, args) => Reflect.apply(get() as (...a: unknown[]) => unknown, thisArg, args),
      construct: (_t, args, newTarget: object) => Reflect.construct(get() as Constructor, args, (newTarget === proxy ? get() : newTarget) as Constructor),
      get: (_t, key, receiver): unknown => Reflect.get(get(), key, receiver === proxy ? get() : receiver) as unknown,
      set: (_t, key, value) => Reflect.set(get(), key, value),
      has: (_t, key) => Reflect.has(get(), key),
      getPrototypeOf: () => Reflect.getPrototypeOf(get()),
    });
    return proxy;
  };
}
