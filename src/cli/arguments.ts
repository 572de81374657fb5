// A command's arguments, parsed with node:util's parseArgs and refused in our words: its own messages
// ("To specify a positional argument starting with a '-', place it at the end...") tell a newcomer
// nothing about what the command takes.
import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';
import { UsageError } from './command.js';

type Options = NonNullable<ParseArgsConfig['options']>;

/** Options a newcomer may guess that the command refuses on purpose, with what to do instead. */
const REFUSED_ON_PURPOSE: Readonly<Record<string, string>> = {
  '--password':
    'a password is never taken on the command line (it would stay in the shell history and the process list): pipe it to --password-stdin',
};

export function parseCommandArgs<T extends Options>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(usageText(error, options));
  }
}

function usageText(error: unknown, options: Options): string {
  const { code, message } = error as { code?: string; message?: string };
  const named = /'(-{1,2}[^' ]+)/.exec(message ?? '')?.[1] ?? '';
  const known = Object.entries(options)
    .map(([name, option]) => `--${name}${option.type === 'string' ? ' <value>' : ''}`)
    .join(', ');
  switch (code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      const why = REFUSED_ON_PURPOSE[named.split('=')[0]];
      return why
        ? `${named.split('=')[0]}: ${why}`
        : `Unknown option ${named}${known ? ` (this command takes ${known})` : ' (this command takes none)'}`;
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return `${named || 'An option'} ${/argument missing/.test(message ?? '') ? 'needs a value' : 'takes no value'}`;
    default:
      return message ?? String(error);
  }
}
