/**
 * Replays recorded sessions through xcompact (the real engine, with a user's config) and the
 * simulated peer policies at given windows, and returns, per policy, one record per agent
 * request (what it sent, what it cost, what it remembered) and the run's memory measures.
 *
 * The input is a Session of imported events (any importer: pi, Claude Code, Codex…), never a
 * file format: the replay sees only the event log.
 */
import type { CompactionEngineOptions } from '../engine/facade';
import type { Summarizer } from '../services/summarizing';
import type { ChatMessage } from '../session/derive';
import type { Session } from '../session/session';
import { MemoryMeter, transcriptOf, type MemoryFigures, type RequestMemory, type Transcript } from './memory';
import { PEERS } from './peers';
import { PRICES, Pricer, type Ledger } from './pricing';
import { simulate, type PeerPolicy, type RunCounts, type SimOptions } from './simulate';
import { replayUserWords, replayXcompact } from './xcompact';
import { checkWindow } from './window';

export const DEFAULT_WINDOWS: readonly number[] = [32_768, 131_072];

export interface EvalOptions {
  /** Context windows to replay at (default 32,768 and 131,072 tokens). */
  windows?: readonly number[];
  /** xcompact's config (the engine's `config` option); the default policy when omitted. */
  config?: CompactionEngineOptions['config'];
  /** The peers to compare with (default: pi, Codex, opencode, Claude Code and naive, simulated). */
  peers?: readonly PeerPolicy[];
  /** Output tokens the agent reserves per request (default 4,096, or a quarter of a smaller window's). */
  maxOutputTokens?: number;
  /** Summary cap, the same for every policy (default 4,096, or a quarter of a smaller window's). */
  summaryCap?: number;
  /** xcompact's summarizer (default: the model-free extractive one every peer uses too). */
  summarizer?: Summarizer;
  /** Keep each request's messages in its record (memory grows with the run; off by default). */
  keepMessages?: boolean;
  /** Dollars per million tokens to bill at (default PRICES). */
  prices?: Readonly<typeof PRICES>;
  /**
   * The count every policy is billed and judged by (default: our own o200k_base count). For a
   * recorded session, `calibratedPricer(session, fitReplayCalibration(recorded).calibration)`
   * counts as the harness's provider did (calibration.ts). One pricer for every window of a
   * session tokenizes each message once.
   */
  pricer?: Pricer;
  /** Hears of each request a policy sends: for a progress display. */
  onRequest?: (progress: { window: number; policy: string; request: number; requests: number }) => void;
}

/** One agent request of one policy. */
export interface RequestRecord {
  /** 0-based, the same request for every policy. */
  index: number;
  /** Messages sent, and their tokens (system, tools and messages). */
  messageCount: number;
  tokens: number;
  /** The messages themselves, when `keepMessages` was set. */
  messages?: readonly ChatMessage[];
  /** What the prompt cache served, and what it did not (summary requests since the previous request included). */
  cachedTokens: number;
  cacheMissTokens: number;
  /** Dollars billed since the previous request: this request, and any summary request before it. */
  cost: number;
  /** Running totals of the policy's compactions and pruned results, and its largest request so far. */
  compactions: number;
  prunes: number;
  peak: number;
  overWindow: boolean;
  /** A compaction happened since the previous request. */
  afterCompaction: boolean;
  /** Tool calls sent without their result, or results without their call (a provider rejects both). */
  unpairedToolCalls: number;
  memory: RequestMemory;
}

export interface PolicyRun {
  policy: string;
  window: number;
  records: RequestRecord[];
  ledger: Ledger;
  compactions: number;
  prunes: number;
  memory: MemoryFigures;
  /** Requests sent with an unpaired tool call or result. */
  unpairedRequests: number;
}

export interface WindowEval {
  window: number;
  /** xcompact first, then the peers in order. */
  runs: PolicyRun[];
}

/** Follows one policy's requests: bills from its ledger, memory from the transcript. */
class Recorder {
  readonly records: RequestRecord[] = [];
  private readonly meter: MemoryMeter;
  private costSoFar = 0;
  private missSoFar = 0;
  private compactionsSeen = 0;

  constructor(
    transcript: Transcript,
    private readonly window: number,
    private readonly keepMessages: boolean,
  ) {
    this.meter = new MemoryMeter(transcript);
  }

  observe(messages: readonly ChatMessage[], counts: RunCounts): void {
    const l = counts.ledger;
    const afterCompaction = counts.compactions > this.compactionsSeen;
    this.compactionsSeen = counts.compactions;
    const tokens = l.lastTokens;
    const record: RequestRecord = {
      index: this.records.length,
      messageCount: messages.length,
      tokens,
      cachedTokens: l.lastCached,
      cacheMissTokens: l.cacheMissTokens - this.missSoFar,
      cost: l.cost - this.costSoFar,
      compactions: counts.compactions,
      prunes: counts.prunes,
      peak: l.peak,
      overWindow: tokens > this.window,
      afterCompaction,
      unpairedToolCalls: unpaired(messages),
      memory: this.meter.observe(messages, afterCompaction, counts.recover),
    };
    if (this.keepMessages) record.messages = messages;
    this.costSoFar = l.cost;
    this.missSoFar = l.cacheMissTokens;
    this.records.push(record);
  }

  run(policy: string, window: number, ledger: Ledger, counts: Omit<RunCounts, 'ledger'>): PolicyRun {
    return {
      policy,
      window,
      records: this.records,
      ledger,
      compactions: counts.compactions,
      prunes: counts.prunes,
      memory: this.meter.figures(),
      unpairedRequests: this.records.filter((r) => r.unpairedToolCalls > 0).length,
    };
  }
}

/** Tool calls in `messages` with no result after them, plus results with no call before them. */
export function unpaired(messages: readonly ChatMessage[]): number {
  const open = new Set<string>();
  let bad = 0;
  for (const m of messages) {
    if (m.role === 'assistant' && m.tool_calls) for (const c of m.tool_calls) open.add(c.id);
    else if (m.role === 'tool') {
      if (open.has(m.tool_call_id)) open.delete(m.tool_call_id);
      else bad++;
    }
  }
  return bad + open.size;
}

/** One session at one window: xcompact, then every peer. */
export async function evaluateWindow(source: Session, window: number, options: EvalOptions = {}): Promise<WindowEval> {
  const pricer = options.pricer ?? new Pricer('o200k_base');
  checkWindow(window, pricer.unrecorded, source.id);
  // A small window (4k) cannot reserve 4,096 output tokens: the defaults shrink to a quarter of it.
  const cap = Math.min(4_096, Math.floor(window / 4));
  const sim: SimOptions = {
    window,
    maxOutputTokens: options.maxOutputTokens ?? cap,
    summaryCap: options.summaryCap ?? cap,
    ...(options.prices ? { prices: options.prices } : {}),
  };
  // Every peer's summaries give the user's own words the budget xcompact's checkpoints get by
  // default at this window: a yardstick of the window, unchanged by xcompact's own config.
  sim.userWordsTokens = replayUserWords(sim);
  const requests = transcriptOfRequests(source);
  const tick = (policy: string, rec: Recorder) => options.onRequest?.({ window, policy, request: rec.records.length, requests });
  const events = source.events();
  const transcript = transcriptOf(events);
  const keep = options.keepMessages === true;
  const runs: PolicyRun[] = [];
  const ours = new Recorder(transcript, window, keep);
  const x = await replayXcompact(
    source,
    pricer,
    sim,
    options.config ?? {},
    (m, counts) => {
      ours.observe(m, counts);
      tick('xcompact', ours);
    },
    options.summarizer,
  );
  runs.push(ours.run('xcompact', window, x.ledger, { compactions: x.compactions, prunes: x.prunes }));
  for (const policy of options.peers ?? PEERS) {
    const rec = new Recorder(transcript, window, keep);
    const r = await simulate(events, policy, pricer, sim, (m, counts) => {
      rec.observe(m, counts);
      tick(policy.name, rec);
    });
    runs.push(rec.run(policy.name, window, r.state.ledger, { compactions: r.state.compactions, prunes: r.state.prunes }));
  }
  return { window, runs };
}

function transcriptOfRequests(source: Session): number {
  let n = 0;
  for (const e of source.events()) if (e.type === 'assistant/message') n++;
  return n;
}

/** Every session at every window. */
export async function evaluate(
  sessions: readonly { name: string; session: Session }[],
  options: EvalOptions = {},
): Promise<Array<{ name: string; windows: WindowEval[] }>> {
  const out: Array<{ name: string; windows: WindowEval[] }> = [];
  for (const { name, session } of sessions) {
    const windows: WindowEval[] = [];
    for (const w of options.windows ?? DEFAULT_WINDOWS) windows.push(await evaluateWindow(session, w, options));
    out.push({ name, windows });
  }
  return out;
}

export { PRICES };
