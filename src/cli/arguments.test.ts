import { describe, expect, it } from 'vitest';
import { parseCommandArgs } from './arguments.js';
import { UsageError } from './command.js';

const options = { 'password-stdin': { type: 'boolean' }, scopes: { type: 'string' } } as const;

function refusal(args: string[]): string {
  try {
    parseCommandArgs(args, options);
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error(`${args.join(' ')} was accepted`);
}

describe('parseCommandArgs', () => {
  it('parses what the command takes', () => {
    const { values, positionals } = parseCommandArgs(['alice', '--scopes', 'system/*.rs', '--password-stdin'], options);
    expect(values).toEqual({ scopes: 'system/*.rs', 'password-stdin': true });
    expect(positionals).toEqual(['alice']);
  });

  it('refuses in its own words, naming what the command takes', () => {
    expect(refusal(['alice', '--bogus'])).toBe(
      'Unknown option --bogus (this command takes --password-stdin, --scopes <value>)',
    );
    expect(refusal(['alice', '--scopes'])).toBe('--scopes needs a value');
    expect(refusal(['alice', '--password-stdin=yes'])).toBe('--password-stdin takes no value');
  });

  it('says why a password is never an option, and what to do instead', () => {
    for (const args of [
      ['alice', '--password', 'x'],
      ['alice', '--password=x'],
    ]) {
      const text = refusal(args);
      expect(text).toMatch(/^--password: a password is never taken on the command line/);
      expect(text).toContain('--password-stdin');
      expect(text).not.toContain('x"');
    }
  });
});
