/**
 * The retention proxy: of the distinct file paths the agent's tool calls named and the
 * distinct error lines its tools reported (failed results; command output lines shaped like an
 * error report, by the summarizers' own test; source code lines excluded) over the whole history, the share still visible
 * verbatim in the last request. Crude on purpose — it cannot tell a useful mention from a
 * useless one — but it is the same test for every policy and it needs no model.
 */
import type { ChatMessage } from '../../src/session/derive.js';
import type { SessionEvent } from '../../src/session/events.js';
import { ERROR_LINE } from '../../src/services/summarizers/ledger.js';

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
}

export function historyFacts(events: Iterable<SessionEvent>): HistoryFacts {
  const paths = new Set<string>();
  const errors = new Set<string>();
  const commandCalls = new Set<string>();
  for (const e of events) {
    if (e.type === 'assistant/message') {
      for (const b of (e as SessionEvent<'assistant/message'>).data.content) {
        if (b.type !== 'tool-call') continue;
        let args: unknown;
        try {
          args = JSON.parse(b.arguments);
        } catch {
          continue;
        }
        if (args === null || typeof args !== 'object') continue;
        for (const [k, v] of Object.entries(args)) {
          if (PATH_KEY.test(k) && typeof v === 'string' && isPath(v)) paths.add(v);
          if (COMMAND_KEY.test(k) && typeof v === 'string') commandCalls.add(b.id);
        }
      }
    } else if (e.type === 'tool/result') {
      const d = (e as SessionEvent<'tool/result'>).data;
      if (d.isError !== true && !commandCalls.has(d.callId)) continue;
      const lines = d.content.flatMap((c) => (c.type === 'text' ? c.text.split('\n') : [])).map((l) => l.trim()).filter((l) => l !== '');
      // A failed result: its first line that names an error, else its first line. A command that
      // succeeded reports an error only in a line shaped like one (`error TS…`, `npm error`, `FAIL`):
      // a README it printed mentions errors without reporting any.
      const line =
        d.isError === true
          ? (lines.find((l) => ERROR_WORDS.test(l) && !CODE_LINE.test(l)) ?? lines[0])
          : lines.find((l) => ERROR_LINE.test(l) && !CODE_LINE.test(l));
      if (line !== undefined) errors.add(line);
    }
  }
  return { paths, errors };
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

export function retention(facts: HistoryFacts, lastRequest: readonly ChatMessage[]): Retention {
  const text = requestText(lastRequest);
  // Arguments are JSON: a path with a backslash or quote is escaped there, so look for both forms.
  const seen = (s: string) => text.includes(s) || text.includes(JSON.stringify(s).slice(1, -1));
  const p = [...facts.paths].filter(seen).length;
  const e = [...facts.errors].filter(seen).length;
  const share = (n: number, d: number) => (d === 0 ? 1 : n / d);
  return { paths: share(p, facts.paths.size), errors: share(e, facts.errors.size), all: share(p + e, facts.paths.size + facts.errors.size) };
}
