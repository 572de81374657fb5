// `ambient-fhir template <verb>`: the scribe's note templates (docs/scribe.md "Templates"). A thin shell
// around scribe/templates.ts: parse arguments, open DATABASE_URL, call the store, print JSON. A running
// server sees a change on its next request.
import { readFile } from 'node:fs/promises';
import { DEFAULT_DOCUMENT_TYPE, TemplateStore, templateJson } from '../scribe/templates.js';
import type { DocumentType, TemplateChanges, TemplateDefinition, TemplateSection } from '../scribe/templates.js';
import { printJson, runAdmin } from './account.js';
import { parseCommandArgs } from './arguments.js';
import type { CliIo, Command } from './command.js';
import { processIo, UsageError } from './command.js';
import { withDatabase } from './startup.js';
import type { CommandHelp } from './usage.js';
import { answerHelp } from './usage.js';

const HELP: CommandHelp = {
  name: 'template',
  verbs: {
    list: { synopsis: 'list', about: 'Prints every template as a JSON array.' },
    show: { synopsis: 'show <id>', about: 'Prints the template.' },
    create: {
      synopsis: `create --name <name> --section "<title>: <guidance>" [--section ...] [--description <text>] [--loinc <code> --loinc-display <text>]
create --json <file|->`,
      about: `Creates a template; new templates get ids from 1000 up. Sections are given in order; the guidance
(after the first ": ") tells the note generator what belongs in the section and may be left out.
--loinc is the LOINC document type the notes are filed under in FHIR (default 34109-9 "Note").
--json reads a template as "template show" prints it (a file name, or - for standard input).`,
    },
    update: {
      synopsis:
        'update <id> [--name <name>] [--description <text>] [--loinc <code> --loinc-display <text>] [--section "<title>: <guidance>" ...] [--json <file|->]',
      about: `Changes only what is named; --section replaces every section. Built-in templates (ids below 1000:
1 SOAP note, 2 history and physical, 3 consultation note) can be changed too.`,
    },
    reset: { synopsis: 'reset <id>', about: 'Brings back the shipped definition of a built-in template.' },
  },
  about: `Works on the database named by DATABASE_URL; a running server sees the change on its next request.
Prints the template as JSON. Exit codes: 0 done, 1 refused (e.g. an unknown id), 2 wrong usage.`,
};

function oneId(positionals: string[], verb: string): number {
  if (positionals.length !== 1) throw new UsageError(`template ${verb} takes exactly one template id`);
  if (!/^\d{1,9}$/.test(positionals[0])) throw new UsageError(`"${positionals[0]}" is not a template id (a number)`);
  return Number(positionals[0]);
}

/** `--section "Title: guidance"`: the title up to the first ": " (or a final ":"), the rest is guidance. */
export function parseSectionOption(value: string): TemplateSection {
  const match = /^(.*?):(?:\s+|$)([\s\S]*)$/.exec(value);
  const [title, guidance] = match ? [match[1], match[2]] : [value, ''];
  if (title.trim() === '') throw new UsageError(`--section "${value}": the section needs a title before the ":"`);
  return { title: title.trim(), guidance: guidance.trim() };
}

async function readJsonOption(io: CliIo, source: string): Promise<unknown> {
  let text = '';
  if (source === '-') {
    for await (const chunk of io.stdin) text += typeof chunk === 'string' ? chunk : (chunk as Buffer).toString('utf8');
  } else {
    try {
      text = await readFile(source, 'utf8');
    } catch (error) {
      throw new UsageError(`--json ${source}: ${(error as Error).message}`);
    }
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new UsageError(`--json ${source}: not valid JSON (${(error as Error).message})`);
  }
}

/** A template as `template show` prints it (id, builtin and updated_at are ignored) → changes. */
export function changesFromJson(value: unknown): TemplateChanges {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new UsageError('--json: the template must be a JSON object');
  }
  const json = value as Record<string, unknown>;
  const changes: { -readonly [K in keyof TemplateDefinition]?: TemplateDefinition[K] } = {};
  if (json.name !== undefined) changes.name = json.name as string;
  if (json.description !== undefined) changes.description = json.description as string;
  if (json.document_type !== undefined) {
    const type = json.document_type as Record<string, unknown> | null;
    if (type?.system !== undefined && type.system !== 'http://loinc.org') {
      throw new UsageError('--json: document_type.system must be http://loinc.org (or left out)');
    }
    changes.documentType = { code: type?.code as string, display: type?.display as string };
  }
  if (json.sections !== undefined) {
    if (!Array.isArray(json.sections)) throw new UsageError('--json: sections must be an array');
    changes.sections = json.sections.map((s: Record<string, unknown> | null) => ({
      title: s?.title as string,
      guidance: (s?.guidance ?? '') as string,
    }));
  }
  return changes;
}

const TEMPLATE_OPTIONS = {
  name: { type: 'string' },
  description: { type: 'string' },
  loinc: { type: 'string' },
  'loinc-display': { type: 'string' },
  section: { type: 'string', multiple: true },
  json: { type: 'string' },
} as const;

type TemplateOptionValues = {
  name?: string;
  description?: string;
  loinc?: string;
  'loinc-display'?: string;
  section?: string[];
  json?: string;
};

async function changesFromOptions(io: CliIo, values: TemplateOptionValues): Promise<TemplateChanges> {
  const fromJson = values.json !== undefined ? changesFromJson(await readJsonOption(io, values.json)) : {};
  if ((values.loinc === undefined) !== (values['loinc-display'] === undefined)) {
    throw new UsageError(
      '--loinc and --loinc-display go together (e.g. --loinc 11506-3 --loinc-display "Progress note")',
    );
  }
  const documentType: DocumentType | undefined =
    values.loinc !== undefined ? { code: values.loinc, display: values['loinc-display']! } : undefined;
  return {
    ...fromJson,
    ...(values.name !== undefined ? { name: values.name } : {}),
    ...(values.description !== undefined ? { description: values.description } : {}),
    ...(documentType ? { documentType } : {}),
    ...(values.section ? { sections: values.section.map(parseSectionOption) } : {}),
  };
}

export function createTemplateCommand(io: CliIo = processIo()): Command {
  return {
    summary: 'manage the scribe note templates (list, show, create, update, reset)',
    help: HELP,
    async run(args: string[]): Promise<number> {
      const answered = answerHelp(io, HELP, args);
      if (answered !== undefined) return answered;
      const [verb, ...rest] = args;
      return runAdmin(io, HELP, verb, async () => {
        switch (verb) {
          case 'list': {
            const { positionals } = parseCommandArgs(rest, {});
            if (positionals.length > 0) throw new UsageError('template list takes no arguments');
            printJson(io, (await withDatabase(io, (db) => new TemplateStore(db).list())).map(templateJson));
            return;
          }
          case 'show': {
            const id = oneId(parseCommandArgs(rest, {}).positionals, 'show');
            const template = await withDatabase(io, (db) => new TemplateStore(db).get(id));
            if (!template) throw new Error(`No template with id ${id}`);
            printJson(io, templateJson(template));
            return;
          }
          case 'create': {
            const { values, positionals } = parseCommandArgs(rest, TEMPLATE_OPTIONS);
            if (positionals.length > 0) throw new UsageError('template create takes no positional arguments');
            const changes = await changesFromOptions(io, values as TemplateOptionValues);
            if (changes.name === undefined) throw new UsageError('template create needs --name (or a name in --json)');
            if (changes.sections === undefined) {
              throw new UsageError('template create needs at least one --section (or sections in --json)');
            }
            const definition: TemplateDefinition = {
              name: changes.name,
              description: changes.description ?? '',
              documentType: changes.documentType ?? DEFAULT_DOCUMENT_TYPE,
              sections: changes.sections,
            };
            printJson(io, templateJson(await withDatabase(io, (db) => new TemplateStore(db).create(definition))));
            return;
          }
          case 'update': {
            const { values, positionals } = parseCommandArgs(rest, TEMPLATE_OPTIONS);
            const id = oneId(positionals, 'update');
            const changes = await changesFromOptions(io, values as TemplateOptionValues);
            if (Object.keys(changes).length === 0) throw new UsageError('template update: name at least one change');
            printJson(io, templateJson(await withDatabase(io, (db) => new TemplateStore(db).update(id, changes))));
            return;
          }
          case 'reset': {
            const id = oneId(parseCommandArgs(rest, {}).positionals, 'reset');
            printJson(io, templateJson(await withDatabase(io, (db) => new TemplateStore(db).reset(id))));
            return;
          }
          default:
            throw new UsageError(`Unknown verb "${verb}"`);
        }
      });
    },
  };
}
