/**
 * Type-level checks of the public API, compiled by `npm run typecheck` (never run): a user
 * can type their own summarizer, wrap it in bounding, plug a custom pruner into the engine,
 * and branch on error codes, importing only from the package's entries.
 */
import {
  boundSummarizer,
  ExtractiveSummarizer,
  XcompactError,
  type BoundingOptions,
  type BoundingReport,
  type CompactionEngineOptions,
  type EngineServices,
  type PruneInput,
  type PruneSummary,
  type Summarizer,
  type SummaryRequest,
  type SummaryResult,
  type SurfaceEvent,
  type Tokenizer,
  type Usage,
  type XcompactErrorCode,
} from '../../src/index';
import { planPrune } from '../../src/advanced';

/** A user's own summarizer, typed from the public API alone. */
class FirstLineSummarizer implements Summarizer {
  readonly name = 'first-line';
  async summarize(request: SummaryRequest, signal: AbortSignal): Promise<SummaryResult> {
    if (signal.aborted) throw new XcompactError('summary-cancelled', 'cancelled');
    const events: readonly SurfaceEvent[] = request.events;
    const usage: Usage = { promptTokens: 0, completionTokens: 0 };
    return { text: `${events.length} events; ${request.messages.length} messages`, requests: 0, usage };
  }
}

declare const tokenizer: Tokenizer;
const options: BoundingOptions = { window: 32_000, tokenizer, safetyMarginTokens: 1_024 };
const bounded: Summarizer = boundSummarizer(new FirstLineSummarizer(), options);
const alsoBounded: Summarizer = boundSummarizer(new ExtractiveSummarizer(), { tokenizer: (text: string) => text.length });
export async function report(request: SummaryRequest): Promise<BoundingReport | undefined> {
  return (await bounded.summarize(request, new AbortController().signal)).bounding ?? (await alsoBounded.summarize(request, AbortSignal.abort())).bounding;
}

/** A custom pruner: the engine's prune service replaced, every type named. */
export const withMyPruner: CompactionEngineOptions['services'] = (defaults: EngineServices): Partial<EngineServices> => ({
  prune(input: PruneInput): PruneSummary {
    if (input.trigger === 'overflow') return defaults.prune(input);
    return { count: 0, tokensFreed: 0, generation: 0 };
  },
});
export const plan: typeof planPrune = planPrune;

/** `code` is a union of the real codes: a typo does not compile, a switch can be exhaustive. */
export function kind(error: XcompactError): 'retry-later' | 'fix-input' | 'other' {
  const known: XcompactErrorCode = error.code;
  // @ts-expect-error — not a code xcompact throws
  const typo: XcompactErrorCode = 'summary-truncate';
  void typo;
  switch (known) {
    case 'busy':
    case 'store-locked':
      return 'retry-later';
    case 'config':
    case 'summary-input-too-large':
      return 'fix-input';
    default:
      return 'other';
  }
}
