/**
 * Reading the span for the extractive summarizer: its events (or, when there are none, its
 * chat messages) as one list of exchanges, and the file paths and shell commands found in
 * tool-call arguments, commands and text.
 */
import { unframeCheckpoint } from './checkpoint';
import type { ChatMessage } from '../../session/derive';
import { isCheckpoint, type SurfaceEvent } from '../../session/events';
import { dedupe } from './extractive-sections';

/** One exchange of the span, whatever it came from (events, or messages when there are none). */
export type Item =
  | { kind: 'user'; text: string; checkpoint: boolean }
  | { kind: 'assistant'; text: string; calls: Array<{ id: string; name: string; args: string }> }
  | { kind: 'tool'; callId: string; toolName: string | undefined; text: string; isError: boolean };

/** Argument keys whose value is a file or directory path. */
export const PATH_KEYS = /^(?:path|paths|file|files|filename|file_?path|filepath|target_?file|notebook_?path|dir|directory|cwd)$/i;
/** Argument keys whose value is a shell command. */
const COMMAND_KEYS = /^(?:command|cmd|script)$/i;
/**
 * A path with at least one directory and a file extension (`src/a.ts`, `./x/y.json`,
 * `/etc/hosts.conf`, `~/.config/a.toml`). Not after `/`, `.`, `@` or a word character, so
 * URLs (`https://host/a.md`) never match from their middle.
 */
const SLASH_PATH = /(?<![\w@./:*-])(?:~\/|\.{1,2}\/|\/)?(?:[\w@.+-]+\/)+[\w@+-][\w@.+-]*\.[A-Za-z][A-Za-z0-9]{0,9}(?![\w/-])/g;
/** A bare file name with a well-known extension (`package.json`); only trusted in commands and code spans. */
const BARE_FILE =
  /(?<![\w@./:*-])[\w@+-][\w@.+-]*\.(?:ts|tsx|mts|cts|js|jsx|mjs|cjs|json|jsonl|md|mdx|yaml|yml|toml|py|rs|go|java|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|bash|zsh|css|scss|html|vue|svelte|sql|txt|lock|env|ini|cfg|conf|xml|gradle|swift)(?![\w/-])/g;
const CODE_SPAN = /`([^`\n]+)`/g;

export function itemsFromEvents(events: readonly SurfaceEvent[]): Item[] {
  const out: Item[] = [];
  for (const e of events) {
    switch (e.type) {
      case 'user/message': {
        const text = e.data.content.map((b) => (b.type === 'text' ? b.text : '')).filter((t) => t !== '').join('\n\n');
        out.push({ kind: 'user', text, checkpoint: isCheckpoint(e) || unframeCheckpoint(text) !== undefined });
        break;
      }
      case 'assistant/message': {
        const text = e.data.content.map((b) => (b.type === 'text' ? b.text : '')).filter((t) => t !== '').join('\n\n');
        const calls = e.data.content.flatMap((b) => (b.type === 'tool-call' ? [{ id: b.id, name: b.name, args: b.arguments }] : []));
        out.push({ kind: 'assistant', text, calls });
        break;
      }
      case 'tool/result': {
        const text = e.data.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
        out.push({ kind: 'tool', callId: e.data.callId, toolName: e.data.toolName, text, isError: e.data.isError === true });
        break;
      }
      case 'system/message':
        break;
    }
  }
  return out;
}

export function itemsFromMessages(messages: readonly ChatMessage[]): Item[] {
  const textOf = (content: unknown): string =>
    typeof content === 'string'
      ? content
      : Array.isArray(content)
        ? (content as Array<{ type: string; text?: string }>).map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('\n\n')
        : '';
  const out: Item[] = [];
  for (const m of messages) {
    if (m.role === 'user') {
      const text = textOf(m.content);
      out.push({ kind: 'user', text, checkpoint: unframeCheckpoint(text) !== undefined });
    } else if (m.role === 'assistant') {
      const calls = (m.tool_calls ?? []).map((c) =>
        c.type === 'function' ? { id: c.id, name: c.function.name, args: c.function.arguments } : { id: c.id, name: c.custom.name, args: c.custom.input },
      );
      out.push({ kind: 'assistant', text: textOf(m.content), calls });
    } else if (m.role === 'tool') {
      out.push({ kind: 'tool', callId: m.tool_call_id, toolName: undefined, text: textOf(m.content), isError: false });
    }
  }
  return out;
}

export function commandArguments(args: unknown): string[] {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return [];
  return Object.entries(args).flatMap(([k, v]) => (COMMAND_KEYS.test(k) && typeof v === 'string' && v.trim() !== '' ? [v.trim()] : []));
}

export function pathsInText(text: string): string[] {
  const out = [...text.matchAll(SLASH_PATH)].map((m) => m[0]);
  for (const span of text.matchAll(CODE_SPAN)) out.push(...[...span[1]!.matchAll(BARE_FILE)].map((m) => m[0]));
  return stripTrailingDots(out);
}

export function pathsInCommand(command: string): string[] {
  return stripTrailingDots([...command.matchAll(SLASH_PATH), ...command.matchAll(BARE_FILE)].map((m) => m[0]));
}

function stripTrailingDots(paths: string[]): string[] {
  return dedupe(paths.map((p) => p.replace(/[.]+$/, '')).filter((p) => p.length > 0));
}
