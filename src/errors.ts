/**
 * The base of every error xcompact throws on purpose: an Error with a stable `code`, so callers
 * can branch on the code instead of parsing messages. Messages say what was wrong and how to
 * fix it. Each layer owns its codes (session/errors.ts, services/config, services/context,
 * services/summarizing, …); src/error-codes.ts puts them together as `XcompactErrorCode` and
 * gives the public `XcompactError` that union as its `code` type. This file imports nothing,
 * so no layer's error module depends on another's.
 */

export class XcompactError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}
