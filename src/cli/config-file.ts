/**
 * The CLI's configuration file: an xcompact configuration as JSON (the same fields as
 * `createCompactionEngine({ config })`, including `models`). Given with --config, or found as
 * `xcompact.config.json` next to the session (the demo writes one there).
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { FileReadError, readRegularFileSync } from '../regular-file';
import { parseConfig, type CompactionConfig, type CompactionConfigInput } from '../services/config';
import { CliError, oneLine } from './errors';
import { jsonErrorLocation } from './load';

export const CONFIG_FILE_NAME = 'xcompact.config.json';

export interface LoadedConfig {
  input: CompactionConfigInput;
  parsed: CompactionConfig;
  /** Where it came from, for the report; undefined = defaults. */
  path: string | undefined;
}

export function loadConfig(explicit: string | undefined, nextTo: string): LoadedConfig {
  const candidate = explicit ?? join(dirname(nextTo), CONFIG_FILE_NAME);
  if (explicit === undefined && !existsSync(candidate)) return { input: {}, parsed: parseConfig({}), path: undefined };
  let text: string;
  try {
    // Only a regular file: a FIFO here would block the whole process (src/regular-file.ts).
    text = readRegularFileSync(candidate).toString('utf8');
  } catch (err) {
    if (!(err instanceof FileReadError)) throw err;
    throw new CliError(`the configuration: ${err.message.replace(/\.$/, '')}; check the --config path.`, 1, { cause: err });
  }
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch (err) {
    const at = jsonErrorLocation(text, err as Error);
    throw new CliError(`${candidate}${at ? `:${at.line}:${at.column}` : ''}: the configuration is not valid JSON (${(err as Error).message}); fix that line.`);
  }
  try {
    return { input: input as CompactionConfigInput, parsed: parseConfig(input), path: candidate };
  } catch (err) {
    throw new CliError(`${candidate}: ${oneLine((err as Error).message)}`, 1, { cause: err });
  }
}
