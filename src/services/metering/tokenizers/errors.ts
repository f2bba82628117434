import { XcompactError } from '../../../errors';
import type { TokenizerName } from './types';

/**
 * A tokenizer was requested whose implementation cannot be loaded, typically because an
 * optional peer package is not installed. Only thrown when that tokenizer is requested.
 */
export class TokenizerUnavailableError extends XcompactError {
  readonly tokenizer: string;
  /** The npm package to install, when a missing package is the cause. */
  readonly packageName: string | undefined;

  constructor(tokenizer: TokenizerName | string, message: string, options?: { packageName?: string; cause?: unknown }) {
    super('tokenizer-unavailable', message, { cause: options?.cause });
    this.tokenizer = tokenizer;
    this.packageName = options?.packageName;
  }
}
