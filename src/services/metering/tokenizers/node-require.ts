import { createRequire } from 'node:module';

/** The subset of Node's `require` the tokenizer loaders use; injectable for tests. */
export interface RequireLike {
  (id: string): unknown;
  resolve(id: string): string;
}

let cached: RequireLike | undefined;

/**
 * A synchronous `require` usable from ESM. Loading through it (instead of a static import)
 * keeps heavy tokenizer tables out of module load: a user pays only for the tokenizer they
 * select. A CommonJS build has `__filename` but an empty `import.meta`, so prefer the former;
 * the bare `require` identifier is avoided because ESM bundles replace it with a throwing shim.
 */
export function nodeRequire(): RequireLike {
  cached ??= createRequire(typeof __filename === 'string' ? __filename : import.meta.url);
  return cached;
}

/** True when `error` means "this module or file could not be found". */
export function isModuleNotFound(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND' || code === 'ERR_PACKAGE_PATH_NOT_EXPORTED';
}
