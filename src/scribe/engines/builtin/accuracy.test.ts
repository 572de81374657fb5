// How often the built-in generator puts a sentence where a clinician would, on the 20 annotated visits of
// test/fixtures/scribe-visits, for the SOAP note (template 1) and the history and physical (template 2).
// Every sentence counts, pleasantries too (they count as right when the note leaves them out). Prints the
// scores (docs/scribe.md keeps them) and fails below 90% per template.
import { describe, expect, it } from 'vitest';
import { BUILTIN_TEMPLATES } from '../../builtin-templates.js';
import {
  loadVisits,
  OMIT,
  percent,
  placements,
  scoreOf,
  TEMPLATE_KEYS,
} from '../../../../test/support/scribe-visits.js';
import type { Placement, Visit } from '../../../../test/support/scribe-visits.js';

const MINIMUM = 0.9;

/** The SOAP section each history and physical section is part of. */
const SOAP_OF: Readonly<Record<string, string>> = {
  'Chief Complaint': 'Subjective',
  'History of Present Illness': 'Subjective',
  'Past Medical History': 'Subjective',
  Medications: 'Subjective',
  Allergies: 'Subjective',
  'Social History': 'Subjective',
  'Family History': 'Subjective',
  'Review of Systems': 'Subjective',
  'Physical Examination': 'Objective',
  'Diagnostic Results': 'Objective',
  Assessment: 'Assessment',
  Plan: 'Plan',
  [OMIT]: OMIT,
};

const visits: Visit[] = loadVisits();

describe('the annotated visits', () => {
  it('are 20 visits of primary care, urgent care and follow-up, 14 for development and 6 held out', () => {
    expect(visits).toHaveLength(20);
    expect(visits.filter((v) => v.split === 'development')).toHaveLength(14);
    expect(visits.filter((v) => v.split === 'holdout')).toHaveLength(6);
    for (const setting of ['primary care', 'urgent care', 'follow-up']) {
      expect(visits.filter((v) => v.setting === setting).length).toBeGreaterThanOrEqual(5);
    }
  });

  it('name only sections of their template (or "omit"), and the SOAP section the H&P section is part of', () => {
    const problems: string[] = [];
    for (const visit of visits) {
      for (const s of visit.turns.flatMap((t) => t.sentences)) {
        for (const [id, key] of Object.entries(TEMPLATE_KEYS)) {
          const titles = BUILTIN_TEMPLATES.get(Number(id))!.sections.map((section) => section.title);
          const unknown = s[key].filter((label) => label !== OMIT && !titles.includes(label));
          if (unknown.length > 0 || s[key].length === 0) problems.push(`${visit.file}: ${key} ${unknown}: ${s.text}`);
        }
        const implied = [...new Set(s.hp.map((label) => SOAP_OF[label]))].sort();
        if (implied.join() !== [...s.soap].sort().join()) problems.push(`${visit.file}: soap ≠ hp: ${s.text}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('are split by the generator into exactly the annotated sentences', () => {
    for (const visit of visits) expect(() => placements(1, visit)).not.toThrow();
  });
});

describe('the built-in generator on the annotated visits', () => {
  const report: string[] = [];

  for (const templateId of [1, 2] as const) {
    const name = BUILTIN_TEMPLATES.get(templateId)!.name;
    it(`puts at least 90% of the sentences where a clinician would: ${name}`, () => {
      const all: Placement[] = visits.flatMap((visit) => placements(templateId, visit));
      const score = scoreOf(all);
      const line = (label: string, list: Placement[]) =>
        `  ${label.padEnd(12)} ${percent(scoreOf(list)).padStart(6)}  (${scoreOf(list).correct}/${scoreOf(list).total})`;
      report.push(
        `${name} (template ${templateId}):`,
        line('all 20', all),
        line(
          'development',
          all.filter((p) => p.visit.split === 'development'),
        ),
        line(
          'holdout',
          all.filter((p) => p.visit.split === 'holdout'),
        ),
        ...all
          .filter((p) => !p.correct)
          .map((p) => `    ${p.visit.file}: "${p.sentence}" → ${p.got}, not ${p.expected.join(' or ')}`),
      );
      console.log(report.splice(0).join('\n'));
      expect(score.correct / score.total).toBeGreaterThanOrEqual(MINIMUM);
    });
  }
});
