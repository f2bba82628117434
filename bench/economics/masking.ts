/**
 * Observation masking, SIMULATED as one more policy of the economics replay (src/eval), to
 * measure what it keeps: older tool outputs are replaced by a short marker (keeping only their
 * error lines, at most three), and long non-action strings of older tool-call arguments (a file
 * written, an edit) by their length; the calls themselves, the assistant's text and the user's
 * words stay. Outside the newest `verbatimTokens`, in passes that free at least `batchTokens`
 * (one cache rewrite each); above `threshold` × window, the head is summarized, the user's
 * messages kept verbatim beside the checkpoint (as Codex keeps them). After JetBrains, "The
 * Complexity Trap" (arXiv 2508.21433). Used by frontier.ts `--masking`; not a policy xcompact ships.
 */
import { errorLinesIn, type Entry, type PeerPolicy, type SimState } from '../../src/eval/index';
// The argument keys naming what the agent did (command, path, pattern): argument pruning never cuts them.
import { ACTION_KEY } from '../../src/services/pruning/index';

export interface MaskingSettings {
  verbatimTokens: number;
  batchTokens: number;
  threshold: number;
  /** Newest tokens a summary keeps. */
  keepTokens: number;
  /** Outputs smaller than this stay. */
  minTokens: number;
  /** Argument strings longer than this are masked. */
  argumentChars: number;
}

export const MASKING_DEFAULTS: MaskingSettings = {
  verbatimTokens: 8_000,
  batchTokens: 4_000,
  threshold: 0.8,
  keepTokens: 12_000,
  minTokens: 60,
  argumentChars: 200,
};

function textOf(e: Entry): string {
  const c = e.msg.content;
  if (typeof c === 'string') return c;
  return Array.isArray(c) ? (c as Array<{ text?: string }>).map((p) => p.text ?? '').join('\n') : '';
}

function maskArguments(json: string, maxChars: number): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return undefined;
  }
  let changed = false;
  const walk = (x: unknown, key: string): unknown => {
    if (typeof x === 'string') {
      if (ACTION_KEY.test(key) || x.length <= maxChars) return x;
      changed = true;
      return `[${x.length} chars masked]`;
    }
    if (Array.isArray(x)) return x.map((y) => walk(y, key));
    if (x !== null && typeof x === 'object') return Object.fromEntries(Object.entries(x).map(([k, y]) => [k, walk(y, k)]));
    return x;
  };
  const out = walk(value, '');
  return changed ? JSON.stringify(out) : undefined;
}

function masked(s: SimState, e: Entry, p: MaskingSettings): Entry | undefined {
  if (e.summary || e.pruned) return undefined;
  const data = (e.event as { data: Record<string, unknown> }).data;
  if (e.event.type === 'tool/result') {
    if (e.tokens < p.minTokens) return undefined;
    const errors = errorLinesIn(textOf(e), data.isError === true).slice(0, 3);
    const text = `[output masked${errors.length > 0 ? `; errors: ${errors.join(' | ')}` : ''}]`;
    return s.entry({ ...e.event, data: { ...data, content: [{ type: 'text', text }] } } as Entry['event'], { pruned: true });
  }
  if (e.event.type !== 'assistant/message') return undefined;
  let changed = false;
  const content = (data.content as Array<{ type: string; arguments?: string }>).map((b) => {
    if (b.type !== 'tool-call' || b.arguments === undefined) return b;
    const m = maskArguments(b.arguments, p.argumentChars);
    if (m === undefined) return b;
    changed = true;
    return { ...b, arguments: m };
  });
  if (!changed) return undefined;
  const next = s.entry({ ...e.event, data: { ...data, content } } as Entry['event'], { pruned: true });
  return next.tokens < e.tokens ? next : undefined;
}

function maskPass(s: SimState, p: MaskingSettings, minimum: number): void {
  let recent = 0;
  let freed = 0;
  const victims: Array<[number, Entry]> = [];
  for (let i = s.entries.length - 1; i >= s.head(); i--) {
    const e = s.entries[i]!;
    if (recent < p.verbatimTokens) {
      recent += e.tokens;
      continue;
    }
    const m = masked(s, e, p);
    if (m) {
      victims.push([i, m]);
      freed += e.tokens - m.tokens;
    }
  }
  if (victims.length === 0 || freed < minimum) return;
  for (const [i, m] of victims) s.entries[i] = m;
  s.prunes += victims.length;
}

async function summarizeHead(s: SimState, p: MaskingSettings): Promise<void> {
  const head = s.head();
  const cut = s.cutKeeping(p.keepTokens);
  if (cut <= head) return;
  const span = s.entries.slice(head, cut);
  const summary = await s.summarize(span);
  s.ledger.summary({ tools: s.tools, messages: [...s.messages(), s.instruction()] }, summary.tokens, true);
  const users = span.filter((e) => e.event.type === 'user/message' && !e.summary);
  s.entries = [...s.entries.slice(0, head), ...users, s.checkpoint(summary.text), ...s.entries.slice(cut)];
  s.compactions++;
}

export function maskingPolicy(settings: Partial<MaskingSettings> = {}): PeerPolicy {
  const p = { ...MASKING_DEFAULTS, ...settings };
  return {
    name: 'masking (sim)',
    summaryLedger: 'files',
    description: `observation masking: older tool outputs → marker with their error lines, long non-action arguments → their length, outside the newest ${p.verbatimTokens} tokens, in passes freeing ≥ ${p.batchTokens}; summary above ${p.threshold} × window keeping ${p.keepTokens}`,
    async beforeRequest(s) {
      if (s.tokens() > p.threshold * s.window) maskPass(s, p, 0);
      if (s.tokens() > p.threshold * s.window) await summarizeHead(s, p);
    },
    async afterTurn(s) {
      maskPass(s, p, p.batchTokens);
    },
    async onOverflow(s) {
      await summarizeHead(s, p);
    },
  };
}
