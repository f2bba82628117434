/**
 * Terminal output for the CLI: colours (off with --no-color, NO_COLOR or a non-TTY), a
 * pressure bar, a spinner that degrades to one plain line when the output is not a
 * terminal, number formatting and aligned key/value tables.
 */

export interface Style {
  enabled: boolean;
  bold: (s: string) => string;
  dim: (s: string) => string;
  red: (s: string) => string;
  green: (s: string) => string;
  yellow: (s: string) => string;
  cyan: (s: string) => string;
  magenta: (s: string) => string;
}

export interface Output {
  write(text: string): void;
  readonly isTTY?: boolean;
  readonly columns?: number;
}

/** The environment a command reads (NO_COLOR, FORCE_COLOR, API keys): process.env unless a caller passes its own. */
export type CliEnv = Readonly<Record<string, string | undefined>>;

export function useColor(requested: boolean, stream: Output, env: CliEnv = process.env): boolean {
  if (!requested) return false;
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0') return true;
  return stream.isTTY === true;
}

export function createStyle(enabled: boolean): Style {
  const wrap = (open: number, close: number) => (s: string) => (enabled ? `\x1b[${open}m${s}\x1b[${close}m` : s);
  return {
    enabled,
    bold: wrap(1, 22),
    dim: wrap(2, 22),
    red: wrap(31, 39),
    green: wrap(32, 39),
    yellow: wrap(33, 39),
    cyan: wrap(36, 39),
    magenta: wrap(35, 39),
  };
}

export function fmt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

export function pct(part: number, whole: number): string {
  if (!(whole > 0)) return '–';
  return `${Math.round((100 * part) / whole)}%`;
}

export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

/** `▕████░░░░▏`, coloured by how close `value` is to `limit`. */
export function bar(style: Style, value: number, limit: number, width = 20): string {
  const ratio = limit > 0 ? Math.max(0, value / limit) : 0;
  const filled = Math.min(width, Math.round(ratio * width));
  const body = '█'.repeat(filled) + '░'.repeat(width - filled);
  const colour = ratio >= 1 ? style.red : ratio >= 0.8 ? style.yellow : style.green;
  return `▕${colour(body)}▏`;
}

/** Rows of label/value, labels padded to one column. */
export function table(rows: ReadonlyArray<readonly [string, string]>, indent = '  '): string {
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${indent}${k.padEnd(width)}  ${v}`).join('\n');
}

export function truncate(s: string, max: number): string {
  const flat = s.replace(/\s+/g, ' ');
  return flat.length <= max ? flat : `${flat.slice(0, Math.max(0, max - 1))}…`;
}

export interface Spinner {
  start(text: string): void;
  stop(): void;
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * On a terminal: an animated line with the elapsed time, erased on stop. Elsewhere (a pipe,
 * CI logs): the text once, as a plain line, so logs stay readable.
 */
export function createSpinner(out: Output, style: Style, enabled: boolean): Spinner {
  let timer: NodeJS.Timeout | undefined;
  if (!enabled) return { start() {}, stop() {} };
  if (!out.isTTY) {
    return {
      start(text) {
        out.write(`   ${style.dim('…')} ${text}\n`);
      },
      stop() {},
    };
  }
  return {
    start(text) {
      this.stop();
      const started = Date.now();
      let frame = 0;
      const draw = () => {
        const elapsed = ((Date.now() - started) / 1000).toFixed(1);
        out.write(`\r\x1b[2K   ${style.cyan(FRAMES[frame++ % FRAMES.length]!)} ${text} ${style.dim(`${elapsed}s`)}`);
      };
      draw();
      timer = setInterval(draw, 80);
    },
    stop() {
      if (!timer) return;
      clearInterval(timer);
      timer = undefined;
      out.write('\r\x1b[2K');
    },
  };
}
