/**
 * Build step, run by `npm run build` right after build-r4 (which writes `generated/r4.json` without code lists and
 * `generated/r4-terminology.json.gz`): expands, with the terminology engine and no stored resources, every value
 * set that a required binding of base R4 names, and writes the codes into r4.json's `valueSets`. So the base
 * validation and the profile checks decide membership one way (the engine's), while validation stays synchronous
 * and never loads the engine: it reads the lists. Run as `node dist/terminology/build-r4-bindings.js`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultDefinitionsPath } from '../definitions/registry.js';
import type { R4Definitions, TypeRule, ValueSetRule } from '../definitions/types.js';
import { AppError, type ErrorCode } from '../errors.js';
import { TerminologyEngine, type StoredTerminology } from './engine.js';

/** What the engine answers for a value set it cannot expand: its binding is recorded as unchecked. */
const UNEXPANDABLE = new Set<ErrorCode>(['terminology-not-found', 'terminology-not-supported', 'expansion-too-costly']);

const NOTHING_STORED: StoredTerminology = { valueSets: async () => [], codeSystems: async () => [] };

/** The value sets of the required bindings of every R4 type's elements, sorted (build-r4 stores them unversioned). */
export function requiredValueSetUrls(types: Record<string, TypeRule>): string[] {
  const urls = new Set<string>();
  for (const type of Object.values(types)) {
    for (const element of Object.values(type.elements)) if (element.binding) urls.add(element.binding);
  }
  return [...urls].sort();
}

/**
 * Each value set's expansion, codes grouped by system and sorted (the file must not depend on compose order), or
 * `unchecked` with the engine's reason. Any other error fails the build.
 */
export async function expandRequiredValueSets(
  urls: readonly string[],
  engine: TerminologyEngine = new TerminologyEngine(NOTHING_STORED),
): Promise<Record<string, ValueSetRule>> {
  const result: Record<string, ValueSetRule> = {};
  for (const url of urls) {
    try {
      const expansion = await engine.expandAll(await engine.requireValueSet(url));
      const bySystem = new Map<string, string[]>();
      for (const { system, code } of expansion.values()) {
        const codes = bySystem.get(system) ?? [];
        codes.push(code);
        bySystem.set(system, codes);
      }
      const codes: Record<string, string[]> = {};
      for (const system of [...bySystem.keys()].sort()) codes[system] = bySystem.get(system)!.sort();
      result[url] = { codes };
    } catch (error) {
      if (!(error instanceof AppError) || !UNEXPANDABLE.has(error.code)) throw error;
      result[url] = { unchecked: `${error.code}: ${error.message}` };
    }
  }
  return result;
}

async function main(): Promise<void> {
  const path = defaultDefinitionsPath();
  const definitions = JSON.parse(readFileSync(path, 'utf8')) as R4Definitions;
  const valueSets = await expandRequiredValueSets(requiredValueSetUrls(definitions.types));
  const text = JSON.stringify({ ...definitions, valueSets });
  writeFileSync(path, text);
  const rules = Object.values(valueSets);
  console.log(
    `wrote ${path}: ${rules.length} required value sets, ${rules.filter((rule) => 'codes' in rule).length} ` +
      `expanded by the terminology engine, ${(text.length / 1024 / 1024).toFixed(2)} MB`,
  );
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main();
}
