/**
 * What the engine's services work on: the session, its meter and the parsed config. Each
 * service module takes these explicitly, so it can be built and tested on its own.
 */
import type { Session } from '../../session/session';
import type { CompactionConfig } from '../config';
import type { TokenMeter } from '../metering';
import type { Tokenizer, TokenizerName } from '../metering';

export interface ServiceDeps {
  session: Session;
  meter: TokenMeter;
  config: CompactionConfig;
  /** Clock for durations (ms). */
  now: () => number;
  /** The tokenizer a route counts with (`options.tokenizer` forces one). */
  tokenizerName: (provider: string | undefined, model: string | undefined) => TokenizerName;
  /** The route's tokenizer itself (a `server` tokenizer is per route); absent: getTokenizer(tokenizerName(…)). */
  tokenizerFor?: (provider: string | undefined, model: string | undefined) => Tokenizer;
}
