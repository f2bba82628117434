/**
 * The writer-side meter (session/writer-snapshot.ts): a session its writer filled with no engine
 * attached gets, when it saves a snapshot nobody claimed, a TokenMeter that counts each route
 * with the tokenizer an engine with the default configuration would, so the store keeps the
 * prices with the log and a reopen restores them (docs/sessions-and-stores.md#reopening-a-long-session).
 * An engine whose configuration picks other tokenizers finds the snapshot does not check out and
 * folds the log itself, as it did before.
 *
 * Registered when this module is loaded (core is, with the engine and every service).
 */
import { setWriterSnapshot } from '../../session/writer-snapshot';
import type { Session } from '../../session/session';
import { parseConfig, tokenizerNameFor } from '../config';
import { TokenMeter } from '../metering';
import { createRouteTokenizers } from './tokenizers';

export function attachWriterMeter(session: Session): void {
  const config = parseConfig({});
  const routes = createRouteTokenizers({
    config,
    tokenizerName: (provider, model) => (provider && model ? tokenizerNameFor(config, provider, model) : (config.tokenizer ?? 'o200k_base')),
  });
  const meter = new TokenMeter(session, { tokenizerFor: (h) => routes.tokenizerFor(h?.data.provider, h?.data.model), weak: true });
  // Its first fold claims the snapshot (weakly) and restores the one the store kept, if any.
  void meter.length;
}

setWriterSnapshot((session) => attachWriterMeter(session as Session));
