/**
 * SIMULATIONS of peer compaction policies, from their sources (cited per constant): pi
 * badlogic/pi-mono@83378aa coding-agent/src/core/compaction, Codex CLI openai/codex
 * codex-rs/core/src/compact.rs and truncate.rs, opencode anomalyco/opencode@001aa6c
 * packages/opencode/src/session/compaction.ts and overflow.ts, Claude Code 2.1.x
 * services/compact/autoCompact.ts (closed source: the constants its bundled cli.js carries,
 * checked against the `compact_boundary` records real sessions hold, see bench/peer-fidelity.ts).
 * Each keeps the peer's trigger, its write-time cap on tool output, its pruning, its cut, what
 * survives a compaction, the lists its summary prompt asks for, and the shape of its summary
 * request (what the prompt cache can share). Every one uses the bench's extractive summarizer
 * and summary cap, so only the policies differ.
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
/** opencode: usable = window − min(20k, max output); prune rules; compaction summarizes the whole history. */
const OPENCODE_PRUNE_PROTECT = 40_000;
const OPENCODE_PRUNE_MINIMUM = 20_000;
const OPENCODE_PRUNED_TEXT = '[Old tool result content cleared]';
const NAIVE_THRESHOLD = 0.8;
/** Codex truncate.rs: a tool output is sent to the model as at most 10 KiB and 256 lines, head and tail kept. */
const CODEX_OUTPUT_BYTES = 10 * 1024;
const CODEX_OUTPUT_LINES = 256;
/** opencode tool/truncation.ts and pi core/tools/truncate.ts: 2,000 lines or 50 KB. */
const LINES_2000 = 2_000;
const BYTES_50K = 50 * 1024;
/** Claude Code: a Bash result over BASH_MAX_OUTPUT_LENGTH (30,000 characters) is cut (its other tools bound their own output). */
const CLAUDE_OUTPUT_CHARS = 30_000;
/** A shell tool's name, in any harness's wording (Bash, bash, shell, exec_command, run_shell_command, local_shell). */
const SHELL_TOOL = /bash|shell|exec|command/i;
/**
 * Claude Code autoCompact.ts: threshold = window − min(max output, COMPACT_MAX_OUTPUT_TOKENS
 * 20,000) − AUTOCOMPACT_BUFFER_TOKENS 13,000 (167,000 of a 200k window). Versions before 2.1.20
 * reserved 32,000 output tokens (155,000): the `preTokens` of real boundaries show both.
 */
const CLAUDE_BUFFER = 13_000;
const CLAUDE_OUTPUT_RESERVE = 20_000;
/** Claude Code re-reads up to 5 recently read files after a compaction, ≤ 5,000 tokens each, ≤ 50,000 in all. */
const CLAUDE_RESTORE_FILES = 5;
const CLAUDE_RESTORE_FILE_TOKENS = 5_000;
const CLAUDE_RESTORE_TOKENS = 50_000;

/** Head and tail kept within a byte and a line budget, an elision note between (Codex, pi, opencode). */
function capOutput(text: string, maxBytes: number, maxLines: number, note: (omitted: number, total: number) => string): string {
  const lines = text.split('\n');
  if (Buffer.byteLength(text) <= maxBytes && lines.length <= maxLines) return text;
  const half = Math.floor(maxLines / 2);
  let head = lines.slice(0, half).join('\n');
  let tail = lines.slice(Math.max(half, lines.length - half)).join('\n');
  const budget = Math.floor(maxBytes / 2);
  if (Buffer.byteLength(head) > budget) head = Buffer.from(head).subarray(0, budget).toString('utf8');
  if (Buffer.byteLength(tail) > budget)
    tail = Buffer.from(tail)
      .subarray(Buffer.byteLength(tail) - budget)
      .toString('utf8');
  const kept = head.split('\n').length + tail.split('\n').length;
  return `${head}\n${note(Math.max(0, lines.length - kept), lines.length)}\n${tail}`;
}

interface SummaryRequestShape {
  tools: string;
  messages: ChatMessage[];
  /** False when the request cannot share the agent's cache key. */
  cacheable: boolean;
  /** False when the request sends a system prompt of its own, not the agent's (nor what the agent sent unrecorded). */
  agentPrompt?: boolean;
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
  s.compactedAt.push(s.level(s.counts));
  const request = requestOf(span);
  const summary = await s.summarize(span);
  s.ledger.summary({ tools: request.tools, messages: request.messages, unrecorded: request.agentPrompt !== false }, summary.tokens, request.cacheable);
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
  // pi's findCutPoint: the first valid cut point at or after where the newest entries reach keepRecentTokens.
  await compactHead(s, s.cutKeeping(PI_KEEP_RECENT, 'newer'), (span) => ({
    tools: '',
    // Its own system prompt and the span as one text: nothing in common with the agent's requests.
    messages: [
      { role: 'system', content: 'You are a context summarization assistant.' },
      { role: 'user', content: `<conversation>\n${piSerialize(span)}\n</conversation>\n\n${s.instruction().content as string}` },
    ],
    cacheable: false,
    agentPrompt: false,
  }));
}

export const pi: PeerPolicy = {
  name: 'pi (sim)',
  // pi's compaction check: the last usage plus characters ÷ 4 of what came since.
  counts: 'estimate',
  summaryLedger: 'files',
  description: `pi: compact when context > window − ${PI_RESERVE}, checked between turns; keep up to ${PI_KEEP_RECENT} recent tokens (cut at the first user or assistant message from where they reach it, a turn split if need be); span serialized to text (tool results ≤ ${PI_TOOL_RESULT_CHARS} chars), previous summary merged, cumulative read/modified file lists; overflow → compact and retry once`,
  toolOutput: (text) => capOutput(text, BYTES_50K, LINES_2000, (n, total) => `[Output truncated: ${n} of ${total} lines omitted]`),
  async beforeRequest(s, firstOfTurn) {
    if (firstOfTurn && s.level(s.counts) > s.window - PI_RESERVE) await piCompact(s);
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
  s.compactedAt.push(s.level(s.counts));
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
  // Codex's: the last response's total plus bytes ÷ 4 of the items since.
  counts: 'estimate',
  summaryLedger: 'none',
  // Its new history keeps the user's messages verbatim; its summary is not given them again.
  userWords: false,
  description: `Codex CLI: tool output to the model ≤ 10 KiB / ${CODEX_OUTPUT_LINES} lines (head + tail); compact before any request (also mid-turn) at ${CODEX_LIMIT} × window; new history = recent real user messages ≤ ${CODEX_USER_TOKENS} tokens + the summary; tool calls dropped; summary request = whole history + prompt`,
  toolOutput: (text) => capOutput(text, CODEX_OUTPUT_BYTES, CODEX_OUTPUT_LINES, (n, total) => `[... omitted ${n} of ${total} lines ...]`),
  async beforeRequest(s) {
    if (s.level(s.counts) >= CODEX_LIMIT * s.window) await codexCompact(s);
  },
  // A request the provider refuses as too long: compact and retry.
  async onOverflow(s) {
    await codexCompact(s);
  },
};

// ---------------------------------------------------------------------------------------

function opencodeUsable(s: SimState): number {
  return s.window - Math.min(20_000, s.options.maxOutputTokens);
}

/** What opencode sends after an automatic compaction (SessionCompaction.process: a synthetic user message). */
const OPENCODE_CONTINUE = 'Continue if you have next steps, or stop and ask for clarification if you are unsure how to proceed.';

/**
 * SessionCompaction.process: the compaction agent summarizes every message so far (the history
 * before the summary is hidden from then on), then a synthetic user message says to continue.
 */
async function opencodeCompact(s: SimState): Promise<void> {
  const compacted = await compactHead(s, s.entries.length, (span) => ({
    tools: '[]',
    // The compaction agent's own system prompt and no tools: a cache miss from byte 0 (opencode#43249).
    messages: [{ role: 'system', content: 'You are a helpful AI assistant tasked with summarizing conversations.' }, ...s.messages(span), s.instruction()],
    cacheable: false,
    agentPrompt: false,
  }));
  if (compacted) s.entries.push(s.synthetic(OPENCODE_CONTINUE));
}

export const opencode: PeerPolicy = {
  name: 'opencode (sim)',
  // opencode's isOverflow: the last response's tokens.
  counts: 'usage',
  // Its template's "Relevant files / directories" section: the files read, edited or created.
  summaryLedger: 'files',
  description: `opencode: tool output ≤ ${LINES_2000} lines / 50 KB; its overflow check before a request: at context ≥ window − min(20k, max output), prune tool outputs older than the last 2 user turns beyond ${OPENCODE_PRUNE_PROTECT} protected tokens (only if ≥ ${OPENCODE_PRUNE_MINIMUM} reclaimable; also after each turn), then if still over compact: the whole history summarized (the previous summary updated), a "continue" message after it; summary request by a separate agent (cache miss)`,
  toolOutput: (text) => capOutput(text, BYTES_50K, LINES_2000, (n) => `... ${n} lines truncated ...`),
  async beforeRequest(s) {
    if (s.level(s.counts) < opencodeUsable(s)) return;
    opencodePrune(s);
    if (s.tokens() >= opencodeUsable(s)) await opencodeCompact(s);
  },
  async onOverflow(s) {
    await opencodeCompact(s);
  },
  async afterTurn(s) {
    opencodePrune(s);
  },
};

/** opencode SessionCompaction.prune: old tool outputs cleared beyond the protected tokens, when enough is reclaimable. */
function opencodePrune(s: SimState): void {
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
}

// ---------------------------------------------------------------------------------------

export const naive: PeerPolicy = {
  name: 'naive (sim)',
  summaryLedger: 'none',
  description: `naive: before any request at ≥ ${NAIVE_THRESHOLD} × window, summarize everything before the last user turn, and the turn's older steps too when it alone is over the window (summary request = that span + prompt)`,
  async beforeRequest(s) {
    if (s.tokens() < NAIVE_THRESHOLD * s.window) return;
    let cut = s.entries.length;
    while (cut > s.head() && !(s.entries[cut - 1]!.event.type === 'user/message' && !s.entries[cut - 1]!.summary)) cut--;
    cut--; // the last turn starts at its user message
    const request = (span: Entry[]): SummaryRequestShape => ({
      tools: s.tools,
      messages: [...s.messages(s.entries.slice(0, s.head())), ...s.messages(span), s.instruction()],
      cacheable: true,
    });
    await compactHead(s, cut, request);
    // The last turn alone is over the window: summarize it too, all but its newest step.
    if (s.tokens() >= s.window) await compactHead(s, s.cutKeeping(0), request);
  },
};

// ---------------------------------------------------------------------------------------

/** Claude Code's auto-compact threshold for a window (autoCompact.ts; `reserve` per version, see above). */
export function claudeCodeThreshold(window: number, maxOutputTokens: number, reserve = CLAUDE_OUTPUT_RESERVE): number {
  return window - Math.min(maxOutputTokens, reserve) - CLAUDE_BUFFER;
}

/** The newest distinct file-reading tool results, ≤ 5 files of ≤ 5,000 tokens, ≤ 50,000 in all (and ≤ `room`). */
function recentlyRead(s: SimState, span: readonly Entry[], room: number): Entry[] {
  const calls = new Map<string, string>();
  for (const e of span)
    for (const c of e.msg.role === 'assistant' ? (e.msg.tool_calls ?? []) : []) if (c.type === 'function') calls.set(c.id, c.function.arguments);
  const out: Entry[] = [];
  const seen = new Set<string>();
  let total = 0;
  for (let i = span.length - 1; i >= 0 && out.length < CLAUDE_RESTORE_FILES; i--) {
    const e = span[i]!;
    if (e.event.type !== 'tool/result' || e.summary || e.pruned) continue;
    const data = e.event.data as { callId: string; toolName?: string; isError?: boolean };
    if (data.isError || !/read|view|cat|open/i.test(data.toolName ?? '')) continue;
    const path = /"(?:file_?path|path|file)"\s*:\s*"([^"]+)"/.exec(calls.get(data.callId) ?? '')?.[1];
    if (!path || seen.has(path) || e.tokens > CLAUDE_RESTORE_FILE_TOKENS || total + e.tokens > Math.min(CLAUDE_RESTORE_TOKENS, room)) continue;
    seen.add(path);
    total += e.tokens;
    const text = typeof e.msg.content === 'string' ? e.msg.content : '';
    out.unshift(
      s.entry(
        {
          seq: -1,
          type: 'user/message',
          time: '',
          data: { content: [{ type: 'text', text: `Called the Read tool with the following input: {"file_path":"${path}"}\n${text}` }] },
        } as unknown as Entry['event'],
        { summary: true },
      ),
    );
  }
  return out;
}

async function claudeCodeCompact(s: SimState): Promise<void> {
  const head = s.head();
  const all = s.entries.slice(head);
  if (all.length === 0 || all.every((e) => e.summary)) return;
  s.compactedAt.push(s.level(s.counts));
  const summary = await s.summarize(all);
  // The summary request is the conversation so far plus the compact prompt, same system and tools: a cache hit.
  s.ledger.summary({ tools: s.tools, messages: [...s.messages(), s.instruction()] }, summary.tokens);
  s.entries = [...s.entries.slice(0, head), s.checkpoint(summary.text)];
  // Re-attached only as far as they leave the request under its threshold: Claude Code checks it again before sending.
  s.entries.push(...recentlyRead(s, all, claudeCodeThreshold(s.window, s.options.maxOutputTokens) - s.tokens()));
  s.compactions++;
}

export const claudeCode: PeerPolicy = {
  name: 'Claude Code (sim)',
  // tokenCountWithEstimation: the last response's usage plus a rough count of the messages since.
  counts: 'estimate',
  // Its compact prompt asks for all user messages, the files and code sections, errors and fixes, pending tasks.
  summaryLedger: 'full',
  description: `Claude Code: shell output ≤ ${CLAUDE_OUTPUT_CHARS} characters; auto-compact before a request at window − min(max output, ${CLAUDE_OUTPUT_RESERVE}) − ${CLAUDE_BUFFER} tokens; the whole conversation summarized (all user messages, files, errors, pending tasks), then up to ${CLAUDE_RESTORE_FILES} recently read files (≤ ${CLAUDE_RESTORE_FILE_TOKENS} tokens each) re-attached; summary request = the conversation + the compact prompt (cache shared); overflow → compact and retry`,
  toolOutput: (text, toolName) =>
    toolName !== undefined && !SHELL_TOOL.test(toolName)
      ? text
      : text.length > CLAUDE_OUTPUT_CHARS
        ? `${text.slice(0, CLAUDE_OUTPUT_CHARS)}\n\n... [${text.split('\n').length - text.slice(0, CLAUDE_OUTPUT_CHARS).split('\n').length} lines truncated] ...`
        : text,
  async beforeRequest(s) {
    if (s.level(s.counts) >= claudeCodeThreshold(s.window, s.options.maxOutputTokens)) await claudeCodeCompact(s);
  },
  async onOverflow(s) {
    await claudeCodeCompact(s);
  },
};

export const PEERS: readonly PeerPolicy[] = [pi, codex, opencode, claudeCode, naive];
