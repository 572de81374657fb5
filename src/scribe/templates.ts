// Note templates: a name, the LOINC document type the note is filed under, and ordered sections (title +
// guidance for whoever writes the note: the built-in generator reads the titles, the LLM both). Built-ins
// live in code (builtin-templates.ts); the `scribe_template` table holds administrators' templates and their
// changes to built-ins. Nothing is cached: a running server sees a `template` CLI change on its next request.
import { UniqueViolationError } from '../storage/sql/database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { BUILTIN_TEMPLATES, FIRST_CUSTOM_TEMPLATE_ID } from './builtin-templates.js';

export const LOINC_SYSTEM = 'http://loinc.org';
/** LOINC 34109-9 "Note": the document type of a template that names none. */
export const DEFAULT_DOCUMENT_TYPE = { code: '34109-9', display: 'Note' } as const;

export interface TemplateSection {
  readonly title: string;
  /** What belongs in the section, for whoever writes it. */
  readonly guidance: string;
}

export interface DocumentType {
  /** A LOINC code, e.g. 11506-3. */
  readonly code: string;
  readonly display: string;
}

export interface TemplateDefinition {
  readonly name: string;
  readonly description: string;
  readonly documentType: DocumentType;
  readonly sections: readonly TemplateSection[];
}

export interface ScribeTemplate extends TemplateDefinition {
  readonly id: number;
  /** Defined in code (ids below 1000), possibly changed by an administrator. */
  readonly builtin: boolean;
  /** When an administrator last created or changed it; null for an unchanged built-in. */
  readonly updatedAt: string | null;
}

/** A refused template operation, with a message written for the administrator. */
export class TemplateError extends Error {
  constructor(
    readonly code: 'not-found' | 'invalid',
    message: string,
  ) {
    super(message);
  }
}

export const TEMPLATE_LIMITS = { name: 100, description: 1000, sections: 30, title: 100, guidance: 2000 } as const;

const LOINC_CODE = /^\d{1,7}-\d$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
/** Guidance and descriptions may hold line breaks and tabs. */
// eslint-disable-next-line no-control-regex
const MULTILINE_CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;

/** Checks a definition and returns it trimmed; throws TemplateError('invalid') naming every problem. */
export function checkTemplateDefinition(definition: TemplateDefinition): TemplateDefinition {
  const problems: string[] = [];
  const text = (value: unknown, what: string, max: number, required: boolean, multiline = false): string => {
    if (typeof value !== 'string') {
      problems.push(`${what} must be a string`);
      return '';
    }
    const trimmed = value.trim();
    if ((multiline ? MULTILINE_CONTROL : CONTROL).test(trimmed))
      problems.push(`${what} must not contain control characters`);
    if (required && trimmed === '') problems.push(`${what} must not be empty`);
    if (trimmed.length > max) problems.push(`${what} must have at most ${max} characters`);
    return trimmed;
  };
  const name = text(definition.name, 'name', TEMPLATE_LIMITS.name, true);
  const description = text(definition.description ?? '', 'description', TEMPLATE_LIMITS.description, false, true);
  const code = text(definition.documentType?.code, 'document type code', 20, true);
  if (code !== '' && !LOINC_CODE.test(code))
    problems.push(`document type code "${code}" is not a LOINC code (e.g. 11506-3)`);
  const display = text(definition.documentType?.display, 'document type display', 200, true);
  const sections: TemplateSection[] = [];
  if (!Array.isArray(definition.sections) || definition.sections.length === 0) {
    problems.push('a template needs at least one section');
  } else if (definition.sections.length > TEMPLATE_LIMITS.sections) {
    problems.push(`a template has at most ${TEMPLATE_LIMITS.sections} sections`);
  } else {
    const seen = new Set<string>();
    definition.sections.forEach((section, i) => {
      const title = text(section?.title, `sections[${i}].title`, TEMPLATE_LIMITS.title, true);
      const guidance = text(section?.guidance ?? '', `sections[${i}].guidance`, TEMPLATE_LIMITS.guidance, false, true);
      if (seen.has(title.toLowerCase())) problems.push(`sections[${i}]: the title "${title}" is used twice`);
      seen.add(title.toLowerCase());
      sections.push({ title, guidance });
    });
  }
  if (problems.length > 0) throw new TemplateError('invalid', `Invalid template: ${problems.join('; ')}`);
  return { name, description, documentType: { code, display }, sections };
}

/** A template as the API and the CLI print it. */
export function templateJson(template: ScribeTemplate): Record<string, unknown> {
  return {
    id: template.id,
    name: template.name,
    description: template.description,
    document_type: { system: LOINC_SYSTEM, code: template.documentType.code, display: template.documentType.display },
    sections: template.sections.map((s) => ({ title: s.title, guidance: s.guidance })),
    builtin: template.builtin,
    updated_at: template.updatedAt,
  };
}

interface TemplateRow {
  id: number;
  definition: string;
  updated_at: string;
}

function fromRow(row: TemplateRow): ScribeTemplate {
  const id = Number(row.id);
  return {
    id,
    ...(JSON.parse(row.definition) as TemplateDefinition),
    builtin: id < FIRST_CUSTOM_TEMPLATE_ID,
    updatedAt: row.updated_at,
  };
}

function builtin(id: number): ScribeTemplate | undefined {
  const definition = BUILTIN_TEMPLATES.get(id);
  return definition ? { id, ...definition, builtin: true, updatedAt: null } : undefined;
}

/** Changes to a template: whatever is given replaces the current value. */
export type TemplateChanges = Partial<TemplateDefinition>;

export class TemplateStore {
  constructor(
    private readonly db: SqlDatabase,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  /** Every template, by id. */
  async list(): Promise<ScribeTemplate[]> {
    const rows = await this.db.query<TemplateRow>('SELECT id, definition, updated_at FROM scribe_template ORDER BY id');
    const byId = new Map<number, ScribeTemplate>();
    for (const id of BUILTIN_TEMPLATES.keys()) byId.set(id, builtin(id)!);
    for (const row of rows) byId.set(Number(row.id), fromRow(row));
    return [...byId.values()].sort((a, b) => a.id - b.id);
  }

  async get(id: number): Promise<ScribeTemplate | undefined> {
    if (!Number.isSafeInteger(id)) return undefined;
    const [row] = await this.db.query<TemplateRow>(
      'SELECT id, definition, updated_at FROM scribe_template WHERE id = ?',
      [id],
    );
    return row ? fromRow(row) : builtin(id);
  }

  /** Which of these ids name no template (for the 400 of a submission). */
  async unknown(ids: readonly number[]): Promise<number[]> {
    const missing: number[] = [];
    for (const id of ids) if (!(await this.get(id))) missing.push(id);
    return missing;
  }

  /** Adds a template; it gets the next free id from 1000 up. */
  async create(definition: TemplateDefinition): Promise<ScribeTemplate> {
    const checked = checkTemplateDefinition(definition);
    const now = this.clock().toISOString();
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.db.transaction(async (tx) => {
          const [row] = await tx.query<{ max_id: number | null }>('SELECT MAX(id) AS max_id FROM scribe_template');
          const id = Math.max(FIRST_CUSTOM_TEMPLATE_ID - 1, Number(row?.max_id ?? 0)) + 1;
          await tx.execute('INSERT INTO scribe_template (id, definition, created_at, updated_at) VALUES (?, ?, ?, ?)', [
            id,
            JSON.stringify(checked),
            now,
            now,
          ]);
          return { id, ...checked, builtin: false, updatedAt: now };
        });
      } catch (error) {
        // Administrators creating at once: each loser tries the next free id, after a short random pause.
        if (!(error instanceof UniqueViolationError) || attempt >= 20) throw error;
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 10 * attempt));
      }
    }
  }

  /** Changes what is given; a built-in changed for the first time gets its row here. */
  async update(id: number, changes: TemplateChanges): Promise<ScribeTemplate> {
    const current = await this.get(id);
    if (!current) throw new TemplateError('not-found', `No template with id ${id}`);
    const checked = checkTemplateDefinition({
      name: changes.name ?? current.name,
      description: changes.description ?? current.description,
      documentType: changes.documentType ?? current.documentType,
      sections: changes.sections ?? current.sections,
    });
    const now = this.clock().toISOString();
    const definition = JSON.stringify(checked);
    const changed = await this.db.execute('UPDATE scribe_template SET definition = ?, updated_at = ? WHERE id = ?', [
      definition,
      now,
      id,
    ]);
    if (changed === 0) {
      await this.db.execute(
        'INSERT INTO scribe_template (id, definition, created_at, updated_at) VALUES (?, ?, ?, ?)',
        [id, definition, now, now],
      );
    }
    return { id, ...checked, builtin: current.builtin, updatedAt: now };
  }

  /** Brings a built-in template back to its definition in code. */
  async reset(id: number): Promise<ScribeTemplate> {
    const original = builtin(id);
    if (!original) {
      throw new TemplateError(
        'not-found',
        (await this.get(id))
          ? `Template ${id} is not a built-in template: there is nothing to reset it to`
          : `No template with id ${id}`,
      );
    }
    await this.db.execute('DELETE FROM scribe_template WHERE id = ?', [id]);
    return original;
  }
}
