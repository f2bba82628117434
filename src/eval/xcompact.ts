/**
 * xcompact in the economics bench: the real engine (createCompactionEngine, default policy)
 * living the recorded session step by step (test/helpers/replay.ts), with the bench's
 * extractive summarizer and summary cap. Its summary requests are billed as the OpenAI
 * summarizer would send them: system prompt, kept checkpoints, the span, the instruction.
 */
import { runRecall } from '../services/recall';
import { createCompactionEngine, type CompactionEngineOptions } from '../engine/facade';
import { BudgetError, ConfigError, parseConfig, resolveBudget } from '../services/config';
import { buildInstruction, ExtractiveSummarizer, type Summarizer, type SummaryRequest, type SummaryResult } from '../services/summarizing';
import { toChatMessage, type ChatMessage } from '../session/derive';
import { Session } from '../session/session';
import { replayThroughEngine } from './replay';
import { Ledger, PRICES, summaryOutputTokens, type Pricer } from './pricing';
import type { RunCounts, SimOptions } from './simulate';

export interface XcompactRun {
  ledger: Ledger;
  compactions: number;
  /** Of those, committed from a summary prepared in the background (docs/spec.md#13-background-compaction). */
  backgroundCompactions: number;
  /** The engine's `background` setting in this run (the default unless the caller set it). */
  background: boolean;
  prunes: number;
  lastRequest: ChatMessage[];
  stuck: number;
  failed: number;
}

/** Bills each summary request to the ledger, then lets the extractive summarizer write it. */
class BilledSummarizer implements Summarizer {
  readonly name = 'extractive';
  constructor(
    private readonly ledger: Ledger,
    private readonly pricer: Pricer,
    private readonly inner: Summarizer = new ExtractiveSummarizer(),
  ) {}

  async summarize(request: SummaryRequest, signal: AbortSignal): Promise<SummaryResult> {
    const result = await this.inner.summarize(request, signal);
    const instruction = buildInstruction({ keptCheckpoints: request.context.length, focus: request.focus });
    const messages: ChatMessage[] = [
      ...(request.system ? [request.system] : []),
      ...request.context,
      ...request.messages,
      { role: 'user', content: instruction },
    ];
    const tools = request.tools.length === 0 ? '' : JSON.stringify(request.tools);
    this.ledger.summary({ tools, messages }, summaryOutputTokens(result.text, this.pricer));
    return result;
  }
}

/** xcompact's config in a replay: the default headroom (65,536) is larger than a 32k window, so it is scaled to the summary cap. */
function replayConfig(options: SimOptions, config: CompactionEngineOptions['config'] = {}): NonNullable<CompactionEngineOptions['config']> {
  return { headroomTokens: options.summaryCap, maxTokens: options.summaryCap, ...config };
}

/**
 * The tokens xcompact's checkpoints give the user's own messages beyond the summary cap at this
 * window (the budget's `userWords`): the replay gives every policy's summaries the same.
 */
export function replayUserWords(options: SimOptions, config: CompactionEngineOptions['config'] = {}): number {
  try {
    const parsed = parseConfig(replayConfig(options, config));
    return resolveBudget({ config: parsed, provider: 'replay', model: 'replay', contextWindow: options.window, modelMaxOutputTokens: options.maxOutputTokens })
      .userWords;
  } catch (err) {
    // A config the engine itself would refuse: the replay reports that; no budget to share.
    if (err instanceof ConfigError || err instanceof BudgetError) return 0;
    throw err;
  }
}

export async function replayXcompact(
  source: Session,
  pricer: Pricer,
  options: SimOptions,
  config: CompactionEngineOptions['config'] = {},
  onRequest?: (messages: readonly ChatMessage[], counts: RunCounts) => void,
  summarizer?: Summarizer,
): Promise<XcompactRun> {
  const ledger = new Ledger(pricer, options.window, options.prices);
  const session = Session.inMemory('economics-xcompact');
  // The bench's price table is the model's: the engine's cost model decides on the prices it is billed at.
  const models: Record<string, { contextWindow: number; maxOutputTokens: number; prices: typeof PRICES }> = {};
  for (const e of source.events()) {
    if (e.type === 'request/header')
      models[`${e.data.provider}/${e.data.model}`] = {
        contextWindow: options.window,
        maxOutputTokens: options.maxOutputTokens,
        prices: options.prices ?? PRICES,
      };
  }
  const engine = createCompactionEngine({
    session,
    models,
    summarizer: new BilledSummarizer(ledger, pricer, summarizer),
    config: replayConfig(options, config),
  });
  let compactions = 0;
  let backgroundCompactions = 0;
  let prunes = 0;
  engine.on((e) => {
    if (e.type === 'compaction.committed') compactions++;
    if (e.type === 'compaction.committed' && e.background === true) backgroundCompactions++;
    if (e.type === 'pruned') prunes += e.count;
  });
  let tools = '';
  let lastRequest: ChatMessage[] = [];
  let billed = 0;
  const recover = engine.config.recall ? recallProbe(session) : undefined;
  const results = await replayThroughEngine(source, session, engine, {
    // The replayed provider reports what it was sent, as the replay counts it: the engine
    // anchors and calibrates on it as on a live provider's usage (the reply re-sent counted in).
    usage: (reply) => ({ promptTokens: billed, completionTokens: pricer.message(toChatMessage(reply)) }),
    beforeReply: () => {
      for (let i = session.length - 1; i >= 0; i--) {
        const e = session.event(i);
        if (e.type === 'request/header') {
          const t = e.data.tools;
          tools = t.length === 0 ? '' : JSON.stringify(t);
          break;
        }
      }
      lastRequest = [...session.deriveMessages()];
      billed = ledger.agent({ tools, messages: lastRequest });
      onRequest?.(lastRequest, { compactions, prunes, ledger, ...(recover ? { recover } : {}) });
    },
  });
  engine.stop();
  return {
    ledger,
    compactions,
    backgroundCompactions,
    background: engine.config.background,
    prunes,
    lastRequest,
    stuck: results.filter((r) => r.status === 'stuck').length,
    failed: results.filter((r) => r.status === 'failed').length,
  };
}

/**
 * `recover(fact)`: the recall tool, asked with a literal query naming the fact (the fact, or its
 * first 80 characters cut at a word), returns it verbatim. A fact once found stays found (the
 * log only grows, a shadowed event stays shadowed); one not found is asked again after the next
 * surface change.
 */
function recallProbe(session: Session): (fact: string) => boolean {
  const found = new Set<string>();
  let missed = new Set<string>();
  let generation = -1;
  return (fact) => {
    if (found.has(fact)) return true;
    const now = session.length;
    if (now !== generation) {
      missed = new Set();
      generation = now;
    }
    if (missed.has(fact)) return false;
    const query = fact.length <= 80 ? fact : fact.slice(0, 80).replace(/\s+\S*$/, '');
    const answer = runRecall(session, { query, maxTokens: 2_000 });
    // The first line names the query: the fact must be in what the recall returned below it.
    const hit = !answer.isError && answer.matches > 0 && answer.text.slice(answer.text.indexOf('\n') + 1).includes(fact);
    (hit ? found : missed).add(fact);
    return hit;
  };
}
