/**
 * SIMULATIONS of peer compaction policies, written from public facts (shared notes on peers:
 * pi badlogic/pi-mono@83378aa, Codex CLI openai/codex compact.rs, opencode session/compaction.ts).
 * They are not the peers' code: each keeps the trigger, the cut and what survives a compaction,
 * and the shape of its summary request (what the prompt cache can share). Every one uses the
 * bench's extractive summarizer and summary cap, so only the policies differ.
 */
import type { ChatMessage } from '../session/derive';
import type { Entry, PeerPolicy, SimState } from './simulate';

/** pi: compaction when context > window − reserve (16,384), checked between turns; keep 20,000 recent tokens. */
const PI_RESERVE = 16_384;
const PI_KEEP_RECENT = 20_000;
/** pi serializes the span to text for its summary request, tool results cut to 2,000 characters. */
const PI_TOOL_RESULT_CHARS = 2_000;
/** Codex: auto-compact limit 0.9 × window; the new history keeps recent real user messages up to 20,000 tokens. */
const CODEX_LIMIT = 0.9;
const CODEX_USER_TOKENS = 20_000;
/** opencode: usable = window − min(20k, max output); compaction keeps ~15k recent tokens; prune rules. */
const OPENCODE_KEEP_RECENT = 15_000;
const OPENCODE_PRUNE_PROTECT = 40_000;
const OPENCODE_PRUNE_MINIMUM = 20_000;
const OPENCODE_PRUNED_TEXT = '[Old tool result content cleared]';
const NAIVE_THRESHOLD = 0.8;

interface SummaryRequestShape {
  tools: string;
  messages: ChatMessage[];
  /** False when the request cannot share the agent's cache key. */
  cacheable: boolean;
}

/**
 * Replaces entries [head, cut) with one checkpoint of them (an earlier checkpoint among them is
 * merged) and bills the summary request the policy would send for that span.
 */
async function compactHead(s: SimState, cut: number, requestOf: (span: Entry[]) => SummaryRequestShape): Promise<boolean> {
  const head = s.head();
  if (cut <= head) return false;
  const span = s.entries.slice(head, cut);
  if (span.every((e) => e.summary)) return false;
  const request = requestOf(span);
  const summary = await s.summarize(span);
  s.ledger.summary({ tools: request.tools, messages: request.messages }, summary.tokens, request.cacheable);
  s.entries = [...s.entries.slice(0, head), s.checkpoint(summary.text), ...s.entries.slice(cut)];
  s.compactions++;
  return true;
}

// ---------------------------------------------------------------------------------------

function piSerialize(span: readonly Entry[]): string {
  const out: string[] = [];
  for (const e of span) {
    const m = e.msg;
    const text = typeof m.content === 'string' ? m.content : Array.isArray(m.content) ? m.content.map((p) => ('text' in p ? p.text : '')).join('\n') : '';
    if (m.role === 'tool') out.push(`[Tool result]: ${text.length > PI_TOOL_RESULT_CHARS ? `${text.slice(0, PI_TOOL_RESULT_CHARS)}…` : text}`);
    else if (m.role === 'assistant') {
      if (text !== '') out.push(`[Assistant]: ${text}`);
      for (const c of m.tool_calls ?? []) if (c.type === 'function') out.push(`[Tool call]: ${c.function.name}(${c.function.arguments})`);
    } else out.push(`[${m.role === 'user' ? 'User' : 'System'}]: ${text}`);
  }
  return out.join('\n\n');
}

async function piCompact(s: SimState): Promise<void> {
  await compactHead(s, s.cutKeeping(PI_KEEP_RECENT), (span) => ({
    tools: '',
    // Its own system prompt and the span as one text: nothing in common with the agent's requests.
    messages: [
      { role: 'system', content: 'You are a context summarization assistant.' },
      { role: 'user', content: `<conversation>\n${piSerialize(span)}\n</conversation>\n\n${s.instruction().content as string}` },
    ],
    cacheable: false,
  }));
}

export const pi: PeerPolicy = {
  name: 'pi (sim)',
  summaryLedger: 'files',
  description: `pi: compact when context > window − ${PI_RESERVE}, checked between turns; keep ${PI_KEEP_RECENT} recent tokens (cut never at a tool result); span serialized to text (tool results ≤ ${PI_TOOL_RESULT_CHARS} chars), previous summary merged, cumulative read/modified file lists; overflow → compact and retry once`,
  async beforeRequest(s, firstOfTurn) {
    if (firstOfTurn && s.tokens() > s.window - PI_RESERVE) await piCompact(s);
  },
  async onOverflow(s) {
    await piCompact(s);
  },
};

// ---------------------------------------------------------------------------------------

async function codexCompact(s: SimState): Promise<void> {
  const head = s.head();
  const all = s.entries.slice(head);
  if (all.length === 0 || all.every((e) => e.summary)) return;
  const summary = await s.summarize(all);
  // The summary request is the whole history plus the prompt: a prefix of the agent's request.
  s.ledger.summary({ tools: s.tools, messages: [...s.messages(), s.instruction()] }, summary.tokens);
  const users: Entry[] = [];
  let budget = CODEX_USER_TOKENS;
  for (let i = all.length - 1; i >= 0; i--) {
    const e = all[i]!;
    if (e.event.type !== 'user/message' || e.summary) continue;
    if (e.tokens > budget) break;
    budget -= e.tokens;
    users.unshift(e);
  }
  s.entries = [...s.entries.slice(0, head), ...users, s.checkpoint(summary.text)];
  s.compactions++;
}

export const codex: PeerPolicy = {
  name: 'Codex (sim)',
  summaryLedger: 'none',
  description: `Codex CLI: compact before any request (also mid-turn) at ${CODEX_LIMIT} × window; new history = recent real user messages ≤ ${CODEX_USER_TOKENS} tokens + the summary; tool calls dropped; summary request = whole history + prompt`,
  async beforeRequest(s) {
    if (s.tokens() >= CODEX_LIMIT * s.window) await codexCompact(s);
  },
};

// ---------------------------------------------------------------------------------------

function opencodeUsable(s: SimState): number {
  return s.window - Math.min(20_000, s.options.maxOutputTokens);
}

async function opencodeCompact(s: SimState): Promise<void> {
  await compactHead(s, s.cutKeeping(OPENCODE_KEEP_RECENT), (span) => ({
    tools: '[]',
    // The compaction agent's own system prompt and no tools: a cache miss from byte 0 (opencode#43249).
    messages: [{ role: 'system', content: 'You are a helpful AI assistant tasked with summarizing conversations.' }, ...s.messages(span), s.instruction()],
    cacheable: false,
  }));
}

export const opencode: PeerPolicy = {
  name: 'opencode (sim)',
  summaryLedger: 'none',
  description: `opencode: compact when context > window − min(20k, max output); keep ~${OPENCODE_KEEP_RECENT} recent tokens, update the previous summary; after each turn prune tool outputs older than the last 2 user turns beyond ${OPENCODE_PRUNE_PROTECT} protected tokens, only if ≥ ${OPENCODE_PRUNE_MINIMUM} reclaimable; summary request by a separate agent (cache miss)`,
  async beforeRequest(s) {
    if (s.tokens() > opencodeUsable(s)) await opencodeCompact(s);
  },
  async onOverflow(s) {
    await opencodeCompact(s);
  },
  async afterTurn(s) {
    let turns = 0;
    let protectedTokens = 0;
    let reclaimable = 0;
    const victims: number[] = [];
    for (let i = s.entries.length - 1; i >= s.head(); i--) {
      const e = s.entries[i]!;
      if (e.event.type === 'user/message' && !e.summary) turns++;
      if (turns < 2) continue;
      if (e.summary) break;
      if (e.event.type !== 'tool/result') continue;
      if (e.pruned) break;
      if (protectedTokens < OPENCODE_PRUNE_PROTECT) {
        protectedTokens += e.tokens;
        continue;
      }
      reclaimable += e.tokens;
      victims.push(i);
    }
    if (reclaimable < OPENCODE_PRUNE_MINIMUM) return;
    for (const i of victims) {
      const old = s.entries[i]!.event as { data: { callId: string; toolName?: string } };
      const event = { ...s.entries[i]!.event, data: { ...old.data, content: [{ type: 'text', text: OPENCODE_PRUNED_TEXT }] } } as Entry['event'];
      s.entries[i] = s.entry(event, { pruned: true });
    }
    s.prunes += victims.length;
  },
};

// ---------------------------------------------------------------------------------------

export const naive: PeerPolicy = {
  name: 'naive (sim)',
  summaryLedger: 'none',
  description: `naive: before any request at ≥ ${NAIVE_THRESHOLD} × window, summarize everything before the last user turn (summary request = that span + prompt)`,
  async beforeRequest(s) {
    if (s.tokens() < NAIVE_THRESHOLD * s.window) return;
    let cut = s.entries.length;
    while (cut > s.head() && !(s.entries[cut - 1]!.event.type === 'user/message' && !s.entries[cut - 1]!.summary)) cut--;
    cut--; // the last turn starts at its user message
    await compactHead(s, cut, (span) => ({ tools: s.tools, messages: [...s.messages(s.entries.slice(0, s.head())), ...s.messages(span), s.instruction()], cacheable: true }));
  },
};

export const PEERS: readonly PeerPolicy[] = [pi, codex, opencode, naive];
