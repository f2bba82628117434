/**
 * The replay loop for the simulated peer policies: the recorded events, in order, through a
 * policy that may rewrite the message list before each request and after each turn. Only the
 * yardsticks are shared with the xcompact replay (pricing, cache model, summarizer, cap); the
 * decisions are each policy's own (peers.ts).
 */
import {
  COMPACTION_INSTRUCTION,
  ExtractiveSummarizer,
  deriveLedger,
  emptyLedger,
  fitLedger,
  frameCheckpoint,
  renderLedger,
  withLedger,
} from '../services/summarizing';
import { toChatMessage, type ChatMessage } from '../session/derive';
import { isSurfaceType, type SessionEvent, type SurfaceEvent } from '../session/events';
import { messageText } from './memory';
import { Ledger, Pricer, summaryOutputTokens, type PRICES, type PricedRequest } from './pricing';

export interface Entry {
  event: SurfaceEvent;
  msg: ChatMessage;
  tokens: number;
  /** A checkpoint this policy wrote. */
  summary: boolean;
  /** A tool result this policy cleared. */
  pruned: boolean;
}

export interface SimOptions {
  window: number;
  /** Output tokens the agent reserves per request. */
  maxOutputTokens: number;
  /** Summary cap, the same for every policy. */
  summaryCap: number;
  /**
   * Tokens a summary may give the user's own messages beyond the cap, the same for every policy
   * (xcompact's engine gives its checkpoints the same budget at this window); default 0.
   */
  userWordsTokens?: number;
  /** Dollars per million tokens the ledgers bill at (default PRICES). */
  prices?: Readonly<typeof PRICES>;
}

export class SimState {
  entries: Entry[] = [];
  tools = '';
  compactions = 0;
  prunes = 0;
  /** The request tokens (this policy's own count) at which each of its compactions started. */
  readonly compactedAt: number[] = [];
  readonly ledger: Ledger;
  private readonly summarizer: ExtractiveSummarizer;

  constructor(
    readonly pricer: Pricer,
    readonly options: SimOptions,
    private readonly summaryLedger: PeerPolicy['summaryLedger'] = 'none',
    private readonly userWords = true,
    /** How the policy counts the request it decides on (level). */
    readonly counts: PeerPolicy['counts'] = 'exact',
  ) {
    this.ledger = new Ledger(pricer, options.window, options.prices);
    this.summarizer = new ExtractiveSummarizer({ ledger: summaryLedger });
  }

  get window(): number {
    return this.options.window;
  }

  messages(entries: readonly Entry[] = this.entries): ChatMessage[] {
    return entries.map((e) => e.msg);
  }

  request(): PricedRequest {
    return { tools: this.tools, messages: this.messages() };
  }

  /** The request as the provider counts it (the replay's calibrated count). */
  tokens(): number {
    return this.pricer.tokens(this.request());
  }

  /** The last request sent and its reply, as the provider reported them: where a harness's own count starts. */
  private reported: { tokens: number; at: number; compactions: number; prunes: number } | undefined;

  /** The provider reported `tokens` for the request just sent and its reply, the newest entry. */
  report(tokens: number): void {
    this.reported = { tokens, at: this.entries.length, compactions: this.compactions, prunes: this.prunes };
  }

  /**
   * The request's size as the policy counts it (PeerPolicy.counts): `exact` the provider's own
   * count; `usage` the last reported usage (the prompt and the reply: opencode's isOverflow);
   * `estimate` that plus a rough count (characters ÷ 4) of what came since (Claude Code's
   * tokenCountWithEstimation, Codex's, pi's). Without a report since the policy's last change
   * to the history, the rough count of the whole request.
   */
  level(counts: PeerPolicy['counts'] = 'exact'): number {
    if (counts === 'exact' || counts === undefined) return this.tokens();
    const r = this.reported;
    if (r && r.compactions === this.compactions && r.prunes === this.prunes && r.at <= this.entries.length) {
      if (counts === 'usage') return r.tokens;
      let sum = r.tokens;
      for (let i = r.at; i < this.entries.length; i++) sum += rough(this.entries[i]!.msg);
      return sum;
    }
    let sum = this.pricer.envelope(this.tools);
    for (const e of this.entries) sum += rough(e.msg);
    return sum;
  }

  entry(event: SurfaceEvent, flags: Partial<Pick<Entry, 'summary' | 'pruned'>> = {}): Entry {
    const msg = toChatMessage(event);
    return { event, msg, tokens: this.pricer.message(msg), summary: flags.summary ?? false, pruned: flags.pruned ?? false };
  }

  /** Index of the first entry that is not the system prompt. */
  head(): number {
    let i = 0;
    while (i < this.entries.length && this.entries[i]!.event.type === 'system/message') i++;
    return i;
  }

  /**
   * The cut that keeps about `keepTokens` of the newest entries: where they add up to it, moved
   * to the nearest entry that is not a tool result (so no call loses its result) — toward the
   * older entries (keeping at least `keepTokens`), or with `newer` toward the newer ones (pi's
   * findCutPoint: at most about that much kept, a large result left to the summary) — never
   * before `head()`.
   */
  cutKeeping(keepTokens: number, toward: 'older' | 'newer' = 'older'): number {
    const head = this.head();
    let kept = 0;
    let i = this.entries.length;
    while (i > head && kept < keepTokens) kept += this.entries[--i]!.tokens;
    if (toward === 'newer') {
      while (i < this.entries.length && this.entries[i]!.event.type === 'tool/result') i++;
      return Math.max(i, head);
    }
    while (i > head && this.entries[i]?.event.type === 'tool/result') i--;
    return i;
  }

  /**
   * The extractive summary of `span` (earlier checkpoints in it are merged), within the shared
   * cap, and the user's own messages within the shared user-words budget (`userWordsTokens`),
   * as every policy whose summary prompt asks for the user's requests gets them: the same
   * summarizer gives them the same way to every policy, so intent recall measures the policy.
   */
  async summarize(span: readonly Entry[]): Promise<{ text: string; tokens: number }> {
    const count = (t: string) => this.pricer.count(t);
    const events = span.map((e) => e.event);
    const userWords = this.userWords ? (this.options.userWordsTokens ?? 0) : 0;
    const result = await this.summarizer.summarize(
      {
        system: undefined,
        tools: [],
        context: [],
        messages: this.messages(span),
        events,
        target: { provider: 'bench', model: 'extractive' },
        maxTokens: this.options.summaryCap,
        countTokens: count,
        ...(this.summaryLedger === 'full' && userWords > 0 ? { userWordsTokens: userWords } : {}),
      },
      new AbortController().signal,
    );
    let text = result.text;
    // A summary without the full ledger has no user-messages list of its own: they are added in the same budget.
    if (this.summaryLedger !== 'full' && userWords > 0) {
      const words = fitLedger({ ...emptyLedger(), requests: deriveLedger(events).requests }, userWords, count);
      if (words.requests.length > 0) text = withLedger(text, renderLedger(words));
    }
    return { text, tokens: summaryOutputTokens(text, this.pricer) };
  }

  /** A user message the harness itself sends (not the user's words: no intent of theirs). */
  synthetic(text: string): Entry {
    const event = { seq: -1, type: 'user/message', time: '', data: { content: [{ type: 'text', text }] } } as unknown as SurfaceEvent;
    return this.entry(event, { summary: true });
  }

  checkpoint(summary: string): Entry {
    const event = { seq: -1, type: 'user/message', time: '', data: { content: [{ type: 'text', text: frameCheckpoint(summary) }] } } as unknown as SurfaceEvent;
    return this.entry(event, { summary: true });
  }

  /** The compaction instruction as the last user message of a summary request. */
  instruction(): ChatMessage {
    return { role: 'user', content: COMPACTION_INSTRUCTION };
  }
}

export interface PeerPolicy {
  name: string;
  /** One line: what the simulation does and where the facts come from. */
  description: string;
  /**
   * The lists the peer's own summaries carry besides the prose (the shared extractive
   * summarizer writes the same prose for all): pi keeps cumulative read/modified file lists;
   * the others publish no such lists.
   */
  summaryLedger: 'full' | 'files' | 'none';
  /**
   * False for a peer that keeps the user's messages verbatim in the history itself (Codex): its
   * summary is not given them again. Every other peer's summary prompt asks for the user's
   * requests, and gets them as every policy does (SimState.summarize). Default true.
   */
  userWords?: boolean;
  /** How the harness counts the request it decides on (SimState.level); default `exact`. */
  counts?: 'exact' | 'usage' | 'estimate';
  /**
   * What the harness itself does to a tool's output before the model ever sees it (every harness
   * caps what a tool returns: Codex 10 KiB, opencode and pi 2,000 lines / 50 KB, Claude Code
   * 30,000 characters). Applied when the result is appended, as the harness writes it.
   */
  toolOutput?(text: string, toolName: string | undefined): string;
  beforeRequest(s: SimState, firstOfTurn: boolean): Promise<void>;
  /** The request is over the window: the provider would reject it. */
  onOverflow?(s: SimState): Promise<void>;
  afterTurn?(s: SimState): Promise<void>;
}

/** What a policy has done so far in a run. */
export interface RunCounts {
  compactions: number;
  prunes: number;
  /** The policy's bill so far (the request just sent included). */
  ledger: Ledger;
  /** The policy's recall tool, when it has one: does a query naming `fact` return it verbatim? */
  recover?: (fact: string) => boolean;
}

export interface SimResult {
  state: SimState;
  lastRequest: ChatMessage[];
}

export async function simulate(
  events: Iterable<SessionEvent>,
  policy: PeerPolicy,
  pricer: Pricer,
  options: SimOptions,
  onRequest?: (messages: readonly ChatMessage[], counts: RunCounts) => void,
): Promise<SimResult> {
  const s = new SimState(pricer, options, policy.summaryLedger, policy.userWords !== false, policy.counts);
  let firstOfTurn = false;
  let lastRequest: ChatMessage[] = [];
  let pendingReport: number | undefined;
  for (const e of events) {
    if (e.type === 'request/header') {
      const tools = e.data.tools;
      s.tools = tools.length === 0 ? '' : JSON.stringify(tools);
    } else if (e.type === 'turn/start') {
      firstOfTurn = true;
    } else if (e.type === 'turn/end') {
      await policy.afterTurn?.(s);
    } else if (e.type === 'assistant/message') {
      await policy.beforeRequest(s, firstOfTurn);
      firstOfTurn = false;
      if (s.tokens() > s.window) await policy.onOverflow?.(s);
      const request = s.request();
      const sent = s.ledger.agent(request);
      pendingReport = sent;
      lastRequest = [...request.messages];
      onRequest?.(lastRequest, { compactions: s.compactions, prunes: s.prunes, ledger: s.ledger });
    }
    if (isSurfaceType(e.type) && e.surfaceOp === 'append') {
      const cap = policy.toolOutput?.bind(policy);
      const entry = s.entry(cap ? withToolOutput(e as SurfaceEvent, cap) : (e as SurfaceEvent));
      s.entries.push(entry);
      // The reply just appended: the provider's usage counts the request and the reply.
      if (e.type === 'assistant/message' && pendingReport !== undefined) s.report(pendingReport + entry.tokens);
      pendingReport = undefined;
    }
  }
  return { state: s, lastRequest };
}

/** A harness's rough token count of a message: its characters ÷ 4. */
function rough(m: ChatMessage): number {
  return Math.ceil(messageText(m).length / 4);
}

/** A tool result with its text parts passed through the harness's own output cap. */
function withToolOutput(e: SurfaceEvent, cap: (text: string, toolName: string | undefined) => string): SurfaceEvent {
  if (e.type !== 'tool/result') return e;
  const data = e.data as { content: Array<{ type: string; text?: string }>; toolName?: string };
  let changed = false;
  const content = data.content.map((part) => {
    if (part.type !== 'text' || typeof part.text !== 'string') return part;
    const text = cap(part.text, data.toolName);
    if (text === part.text) return part;
    changed = true;
    return { ...part, text };
  });
  return changed ? ({ ...e, data: { ...data, content } } as SurfaceEvent) : e;
}
