/**
 * The retention proxy: of the distinct file paths the agent's tool calls named and the
 * distinct error lines its tools reported (failed results; command output lines shaped like an
 * error report, by the summarizers' own test; source code lines excluded), the share visible
 * verbatim in a request — in its messages, or in the summaries the policy itself wrote.
 *
 * Measured at EVERY agent request, over the items the history had before it: a policy that
 * forgets a path after one compaction and meets it again later is caught in between, where a
 * look at the last request alone would not see it. The run's figures are the mean and the
 * minimum of that share over the requests, and the share in the last request.
 *
 * Crude on purpose — it cannot tell a useful mention from a useless one — but it is the same
 * test for every policy and it needs no model. Each policy's summaries carry only what its
 * public design carries (peers.ts), so a ledger one policy has is not lent to the others.
 */
import type { ChatMessage } from '../session/derive';
import type { SessionEvent } from '../session/events';
import { ERROR_LINE } from '../services/summarizing';

/** Argument keys whose value names a file or directory. */
const PATH_KEY = /path|file|dir/i;
/** Argument keys whose value is a shell command: its output is where errors are reported. */
const COMMAND_KEY = /^(?:command|cmd|script)$/i;
const ERROR_WORDS = /\berror\b|\bfailed\b|\bFAIL\b|exception|not found|no such file|cannot|denied|fatal|panic|traceback/i;
/**
 * Source code, not a report: a command that printed a file (`grep`, `sed -n`) shows lines like
 * `} catch (error) {` or `throw new Error(…);`, which mention errors without reporting one.
 */
const CODE_LINE = /^(?:[{}()[\]]|\/\/|\/\*|\*|#|throw\b|catch\b|if\b|else\b|return\b|const\b|let\b|var\b|function\b|import\b|export\b|class\b|def\b)|[{;,]$/;

export interface HistoryFacts {
  paths: Set<string>;
  errors: Set<string>;
  /** Each item (path or error line) → the index of the first agent request whose history holds it. */
  since: Map<string, number>;
}

export function historyFacts(events: Iterable<SessionEvent>): HistoryFacts {
  const paths = new Set<string>();
  const errors = new Set<string>();
  const since = new Map<string, number>();
  const commandCalls = new Set<string>();
  // Requests before the event being read: what it adds is history from the next request on.
  let requests = 0;
  const note = (item: string, at: number) => {
    if (!since.has(item)) since.set(item, at);
  };
  for (const e of events) {
    if (e.type === 'assistant/message') {
      // The reply's tool calls are history for the requests after this one.
      requests++;
      for (const b of e.data.content) {
        if (b.type !== 'tool-call') continue;
        let args: unknown;
        try {
          args = JSON.parse(b.arguments);
        } catch {
          continue;
        }
        if (args === null || typeof args !== 'object') continue;
        for (const [k, v] of Object.entries(args)) {
          if (PATH_KEY.test(k) && typeof v === 'string' && isPath(v)) {
            paths.add(v);
            note(v, requests);
          }
          if (COMMAND_KEY.test(k) && typeof v === 'string') commandCalls.add(b.id);
        }
      }
    } else if (e.type === 'tool/result') {
      const d = e.data;
      if (d.isError !== true && !commandCalls.has(d.callId)) continue;
      const lines = d.content
        .flatMap((c) => (c.type === 'text' ? c.text.split('\n') : []))
        .map((l) => l.trim())
        .filter((l) => l !== '');
      // A failed result: its first line that names an error, else its first line. A command that
      // succeeded reports an error only in a line shaped like one (`error TS…`, `npm error`, `FAIL`):
      // a README it printed mentions errors without reporting any.
      const line =
        d.isError === true
          ? (lines.find((l) => ERROR_WORDS.test(l) && !CODE_LINE.test(l)) ?? lines[0])
          : lines.find((l) => ERROR_LINE.test(l) && !CODE_LINE.test(l));
      if (line !== undefined) {
        errors.add(line);
        note(line, requests);
      }
    }
  }
  return { paths, errors, since };
}

function isPath(v: string): boolean {
  return v.length > 1 && v.length <= 260 && !v.includes('\n') && /[/.]/.test(v) && !/^[a-z]+:\/\//i.test(v);
}

/** Every text a request shows the model: message contents, tool names and arguments. */
export function requestText(messages: readonly ChatMessage[]): string {
  const parts: string[] = [];
  for (const m of messages) {
    const c = m.content;
    if (typeof c === 'string') parts.push(c);
    else if (Array.isArray(c)) for (const p of c as Array<{ type: string; text?: string }>) if (p.type === 'text') parts.push(p.text ?? '');
    if (m.role === 'assistant' && m.tool_calls) for (const t of m.tool_calls) if (t.type === 'function') parts.push(t.function.name, t.function.arguments);
  }
  return parts.join('\n');
}

export interface Retention {
  paths: number;
  errors: number;
  /** Share of paths and error lines together. */
  all: number;
}

export interface RetentionFigures {
  /** In the last request, of the items its history held. */
  last: Retention;
  /** Mean over the requests (those with any history item) of the share of the items so far visible. */
  mean: number;
  /** The least share any request showed, and the first request (0-based) that showed it. */
  min: number;
  minAt: number;
  /** Requests measured (those whose history held at least one item). */
  requests: number;
}

/**
 * Follows one policy's requests. Each distinct message is searched once (by its content), so
 * a run of n requests costs the distinct messages × items, not n × the request.
 */
export class RetentionTracker {
  private readonly items: string[];
  private readonly isPath: boolean[];
  private readonly since: number[];
  private readonly byMessage = new Map<string, number[]>();
  private request = 0;
  private sum = 0;
  private measured = 0;
  private least = 1;
  private leastAt = -1;
  private lastVisible = new Set<number>();

  constructor(private readonly facts: HistoryFacts) {
    this.items = [...facts.paths, ...facts.errors];
    this.isPath = this.items.map((_, i) => i < facts.paths.size);
    this.since = this.items.map((x) => facts.since.get(x) ?? Number.POSITIVE_INFINITY);
  }

  /** The next agent request, in order. */
  observe(messages: readonly ChatMessage[]): void {
    const k = this.request++;
    const visible = new Set<number>();
    for (const m of messages) for (const i of this.itemsIn(m)) visible.add(i);
    this.lastVisible = visible;
    let due = 0;
    let seen = 0;
    for (let i = 0; i < this.items.length; i++) {
      if (this.since[i]! > k) continue;
      due++;
      if (visible.has(i)) seen++;
    }
    if (due === 0) return;
    const share = seen / due;
    this.sum += share;
    this.measured++;
    if (share < this.least) {
      this.least = share;
      this.leastAt = k;
    }
  }

  figures(): RetentionFigures {
    const share = (n: number, d: number) => (d === 0 ? 1 : n / d);
    // The last request against the items its history held.
    const k = this.request - 1;
    const count = { paths: 0, errors: 0, pathsSeen: 0, errorsSeen: 0 };
    for (let i = 0; i < this.items.length; i++) {
      if (this.since[i]! > k) continue;
      const seen = this.lastVisible.has(i);
      if (this.isPath[i]) {
        count.paths++;
        if (seen) count.pathsSeen++;
      } else {
        count.errors++;
        if (seen) count.errorsSeen++;
      }
    }
    return {
      last: {
        paths: share(count.pathsSeen, count.paths),
        errors: share(count.errorsSeen, count.errors),
        all: share(count.pathsSeen + count.errorsSeen, count.paths + count.errors),
      },
      mean: this.measured === 0 ? 1 : this.sum / this.measured,
      min: this.measured === 0 ? 1 : this.least,
      minAt: this.leastAt,
      requests: this.measured,
    };
  }

  private itemsIn(m: ChatMessage): number[] {
    const key = JSON.stringify(m);
    let found = this.byMessage.get(key);
    if (found === undefined) {
      const text = requestText([m]);
      found = [];
      // Arguments are JSON: a path with a backslash or quote is escaped there, so look for both forms.
      for (let i = 0; i < this.items.length; i++) {
        const s = this.items[i]!;
        if (text.includes(s) || text.includes(JSON.stringify(s).slice(1, -1))) found.push(i);
      }
      this.byMessage.set(key, found);
    }
    return found;
  }
}
