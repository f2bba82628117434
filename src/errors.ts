/**
 * Every error xcompact throws on purpose is an XcompactError with a stable `code`,
 * so callers can branch on the code instead of parsing messages. Messages say what
 * was wrong and how to fix it.
 */
export class XcompactError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}
