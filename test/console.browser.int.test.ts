// The web console as a person uses it, in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core) against a real `serve` process on SQLite (on each database in `npm run test:full`: the
// console reaches a database only through the API, whose suites run on both), through the accessible names
// the console promises (docs/console.md): sign in, search and page, open a resource, edit it with an
// invalid value and see the error next to its path, fix it, see the new version in the history, create
// one, delete one after confirming; find a code with $expand and insert it into a new resource; a stored
// narrative's script, handler and javascript: link do nothing; an API error, a 403 and $expand's 404 and
// 422 are shown as text; what refers to a Practitioner and to an Organization; the selected type's count;
// signing out, a revoked token and an expired one (a second server whose tokens live 3 s) bring back the
// sign-in form. Screenshots of the main screens at 1280x800 and 800x600 go to a temporary folder (printed).
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountStore } from '../src/auth/accounts.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { SqlDatabase } from '../src/storage/sql/database.js';
import { backendsQuickOn, testDatabase } from './support/databases.js';
import type { TestDatabase } from './support/databases.js';
import { startServerProcess } from './support/server-process.js';
import type { ServerProcess } from './support/server-process.js';

const CHROMIUM = '/usr/bin/chromium';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  console.warn(`[console browser tests] no ${CHROMIUM}: skipped (Debian: apt-get install -y chromium)`);
}

/** Without the networking switches Chromium keeps trying to reach Google's services. */
const LAUNCH_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const VIEWPORTS = [
  { width: 1280, height: 800 },
  { width: 800, height: 600 },
];
const SHOTS = mkdtempSync(join(tmpdir(), 'ambient-console-screens-'));
/** The lifetime of the second server's tokens, in seconds. */
const SHORT_TOKEN_TTL = 3;

/**
 * The types with a reference search parameter that can target `target`, read from the R4 definitions
 * (a parameter without target types targets any): what "Referred to by" asks about, 16 a request.
 */
function referringTypes(target: string): string[] {
  const r4 = JSON.parse(readFileSync(new URL('../generated/r4.json', import.meta.url), 'utf8'));
  const params = r4.searchParameters as Record<string, { type: string; expression?: string; targets?: string[] }[]>;
  return Object.keys(params).filter((source) =>
    params[source].some(
      (p) => p.type === 'reference' && p.expression && (!p.targets?.length || p.targets.includes(target)),
    ),
  );
}

interface Api {
  (method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
}

async function tokenFor(url: string, username: string, password: string): Promise<string> {
  const response = await fetch(`${url}/v1/ambient/api/auth/token`, {
    method: 'POST',
    body: new URLSearchParams({ username, password }),
  });
  return ((await response.json()) as { access_token: string }).access_token;
}

function apiOf(url: string, token: string): Api {
  return async (method, path, body) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  };
}

describe.skipIf(!HAVE_CHROMIUM).each(backendsQuickOn('sqlite'))('the web console in Chromium on %s', (backend) => {
  let database: TestDatabase;
  let server: ServerProcess;
  /** A second server on the same database whose tokens live SHORT_TOKEN_TTL seconds. */
  let shortServer: Promise<ServerProcess> | undefined;
  let adminDb: SqlDatabase;
  let accounts: AccountStore;
  let browser: Browser;
  let api: Api;
  const username = `console-${randomUUID().slice(0, 8)}`;
  const password = `pw-${randomUUID()}`;
  const family = `Zyx${randomUUID()
    .slice(0, 6)
    .replace(/[^a-z]/g, 'q')}`;
  const patients: Record<string, any> = {};
  /** Every request any page made, to check that none went to another host. */
  const requested: string[] = [];

  beforeAll(async () => {
    database = await testDatabase(backend);
    server = await startServerProcess({ DATABASE_URL: database.url });
    // Started while the data below is written and the tests run (the first server has created the schema).
    shortServer = startServerProcess({
      DATABASE_URL: database.url,
      AMBIENT_TOKEN_TTL_SECONDS: String(SHORT_TOKEN_TTL),
    });
    // A failure to start fails the expiry test, which awaits it; the other tests do not need it.
    shortServer.catch(() => undefined);
    adminDb = openDatabase(database.url);
    accounts = new AccountStore(adminDb);
    await accounts.create({
      username,
      password,
      scopes: ['system/*.cruds', 'scribe.read', 'scribe.write'],
      rateLimit: null,
    });
    api = apiOf(server.url, await tokenFor(server.url, username, password));
    for (const [key, given, birthDate] of [
      ['edited', 'Ada', '1974-12-25'],
      ['second', 'Bea', '1980-01-01'],
      ['deleted', 'Cid', '1990-06-15'],
    ]) {
      const created = await api('POST', '/fhir/Patient', {
        resourceType: 'Patient',
        name: [{ family, given: [given] }],
        gender: 'female',
        birthDate,
        identifier: [{ system: 'urn:test', value: `${key}-1` }],
        text: {
          status: 'generated',
          div: `<div xmlns="http://www.w3.org/1999/xhtml"><p><b>${given} ${family}</b>, female, born ${birthDate}</p></div>`,
        },
      });
      expect(created.status).toBe(201);
      patients[key] = created.body;
    }
    const observation = await api('POST', '/fhir/Observation', {
      resourceType: 'Observation',
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }] },
      subject: { reference: `Patient/${patients.edited.id}` },
      effectiveDateTime: '2024-03-01T10:00:00Z',
      valueQuantity: { value: 72, unit: 'beats/minute', system: 'http://unitsofmeasure.org', code: '/min' },
    });
    expect(observation.status).toBe(201);
    patients.observation = observation.body;
    const hostile = await api('POST', '/fhir/Patient', {
      resourceType: 'Patient',
      name: [{ family: 'Narrative', given: ['Hostile'] }],
      text: {
        status: 'generated',
        div:
          '<div xmlns="http://www.w3.org/1999/xhtml"><p>Hostile narrative</p>' +
          '<script>window.__xss = "script"</script>' +
          '<img src="x" onerror="window.__xss = \'onerror\'"/>' +
          '<a id="js-link" href="javascript:window.__xss = \'link\'">open</a></div>',
      },
    });
    expect(hostile.status).toBe(201);
    patients.hostile = hostile.body;
    await createReferred();
    browser = await chromium.launch({ headless: true, executablePath: CHROMIUM, args: LAUNCH_ARGS });
  }, 60_000);

  /** A Practitioner referred to by an Encounter and an Observation; an Organization by a Patient. */
  const referred: Record<string, any> = {};
  async function createReferred(): Promise<void> {
    const create = async (key: string, resource: Record<string, unknown>) => {
      const created = await api('POST', `/fhir/${String(resource.resourceType)}`, resource);
      expect(created.status).toBe(201);
      referred[key] = created.body;
    };
    await create('practitioner', { resourceType: 'Practitioner', name: [{ family: 'Osler', given: ['William'] }] });
    await create('organization', { resourceType: 'Organization', name: 'St Elsewhere' });
    await create('otherOrganization', { resourceType: 'Organization', name: 'Nobody refers here' });
    const practitioner = { reference: `Practitioner/${referred.practitioner.id}` };
    await create('encounter', {
      resourceType: 'Encounter',
      status: 'finished',
      class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
      participant: [{ individual: practitioner }],
    });
    await create('observation', {
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'Blood pressure' },
      performer: [practitioner],
    });
    await create('managed', {
      resourceType: 'Patient',
      name: [{ family: 'Managed' }],
      managingOrganization: { reference: `Organization/${referred.organization.id}` },
    });
  }

  afterAll(async () => {
    await browser?.close();
    for (const s of [server, await shortServer?.catch(() => undefined)]) {
      s?.child.kill('SIGKILL');
      await s?.exited;
    }
    await adminDb?.close();
    await database?.dispose();
  });

  /** A fresh browser context (no shared state) whose page records its requests and CSP violations. */
  async function newPage(): Promise<{ page: Page; context: BrowserContext; violations: string[] }> {
    const context = await browser.newContext({ viewport: VIEWPORTS[0] });
    const page = await context.newPage();
    const violations: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
    });
    return { page, context, violations };
  }

  async function signIn(page: Page, name = username, secret = password): Promise<void> {
    await page.getByLabel('Username').fill(name);
    await page.getByLabel('Password').fill(secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
  }

  /** The page at each viewport size, scrolled to `focus` when given. */
  async function screenshots(page: Page, name: string, focus?: Locator): Promise<void> {
    for (const viewport of VIEWPORTS) {
      await page.setViewportSize(viewport);
      await focus?.scrollIntoViewIfNeeded();
      await page.screenshot({ path: join(SHOTS, `${backend}-${name}-${viewport.width}x${viewport.height}.png`) });
    }
    await page.setViewportSize(VIEWPORTS[0]);
  }

  async function search(page: Page, type: string, query: string): Promise<void> {
    await page.getByLabel('Resource type').selectOption(type);
    await page.getByLabel('Search parameters').fill(query);
    await page.getByRole('button', { name: 'Search' }).click();
  }

  /** The text of each body row's cells. */
  async function rows(page: Page): Promise<string[][]> {
    await page.locator('table tbody tr').first().waitFor();
    return page
      .locator('table')
      .first()
      .locator('tbody tr')
      .evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')));
  }

  it('signs in from /, keeps the token out of storage, searches Patients and pages with Next and Previous', async () => {
    const { page, context, violations } = await newPage();
    await page.goto(`${server.url}/`);
    expect(new URL(page.url()).pathname).toBe('/console');
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await screenshots(page, 'sign-in');

    // A wrong password: the token endpoint's own words, and still the form.
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password').fill('not-the-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/invalid|password/i);

    await signIn(page);
    const nav = page.getByRole('navigation', { name: 'Console' });
    expect(await nav.getByRole('link').allTextContents()).toEqual(['Resources', 'Scribe', 'Exports']);
    // (Expressions as strings: they run in the page, whose globals this file's types do not know.)
    const stored = await page.evaluate(
      '({ local: localStorage.length, session: sessionStorage.length, cookie: document.cookie })',
    );
    expect(stored).toEqual({ local: 0, session: 0, cookie: '' });

    await search(page, 'Patient', `family=${family}&_count=2&_sort=birthdate`);
    let table = await rows(page);
    expect(await page.locator('thead th').allTextContents()).toEqual([
      'Id',
      'Name',
      'Gender',
      'Birth date',
      'Identifier',
      'Last updated',
    ]);
    expect(table.map((r) => r.slice(0, 5))).toEqual([
      [patients.edited.id, `Ada ${family}`, 'female', '1974-12-25', 'edited-1'],
      [patients.second.id, `Bea ${family}`, 'female', '1980-01-01', 'second-1'],
    ]);
    // The first cell links to the resource's page.
    const firstLink = page.locator('tbody tr').first().locator('td').first().getByRole('link');
    expect(await firstLink.getAttribute('href')).toBe(`/console/resources/Patient/${patients.edited.id}`);
    await screenshots(page, 'search-results');

    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByText('page 2').waitFor();
    table = await rows(page);
    expect(table.map((r) => r[0])).toEqual([patients.deleted.id]);
    expect(await page.getByRole('button', { name: 'Next' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Previous' }).click();
    await page.getByText('page 1').waitFor();
    expect((await rows(page)).map((r) => r[0])).toEqual([patients.edited.id, patients.second.id]);

    // Observations: code, value, date, subject (a link to the Patient); the total when the page holds it all.
    await search(page, 'Observation', `subject=Patient/${patients.edited.id}`);
    table = await rows(page);
    expect(table[0].slice(1, 5)).toEqual([
      'Heart rate',
      '72 beats/minute',
      '2024-03-01T10:00:00Z',
      `Patient/${patients.edited.id}`,
    ]);
    await page.getByText('1 match', { exact: true }).waitFor();

    // An API error is shown as the OperationOutcome's diagnostics.
    await search(page, 'Patient', 'birthdate=not-a-date');
    expect(await page.getByRole('alert').textContent()).toMatch(/birthdate/);
    expect(violations).toEqual([]);
    await context.close();
  }, 60_000);

  it('opens a Patient, shows an invalid edit next to its path, saves the fix and lists version 2 beside 1', async () => {
    const { page, context, violations } = await newPage();
    // A deep link: the sign-in form first, then the page it names.
    await page.goto(`${server.url}/console/resources?type=Patient&q=family%3D${family}`);
    await signIn(page);
    await page.locator('tbody tr').first().getByRole('link').click();
    for (const name of ['Narrative', 'JSON', 'History']) {
      await page.getByRole('heading', { name, exact: true }).waitFor();
    }
    expect(await page.locator('pre.json').textContent()).toContain(`"id": "${patients.edited.id}"`);
    // What it refers to, and what refers to it (its compartment): the Observation.
    await page.getByRole('link', { name: `Observation/${patients.observation.id}` }).waitFor();
    await screenshots(page, 'resource');

    await page.getByRole('button', { name: 'Edit' }).click();
    const editor = page.getByLabel('Resource JSON');
    const resource = JSON.parse(await editor.inputValue());
    expect(resource.id).toBe(patients.edited.id);
    await editor.fill(JSON.stringify({ ...resource, birthDate: '1974-13-45' }, null, 2));
    await page.getByRole('button', { name: 'Save' }).click();
    const problem = page.getByRole('list', { name: 'Validation errors' }).getByRole('listitem');
    await problem.first().waitFor();
    expect(await problem.locator('code.path').allTextContents()).toEqual(['Patient.birthDate']);
    expect(await problem.first().textContent()).toMatch(/^Patient\.birthDate.*not a valid date/);
    await screenshots(page, 'validation-error', page.getByRole('heading', { name: /^Edit Patient/ }));

    await editor.fill(JSON.stringify({ ...resource, birthDate: '1975-01-02' }, null, 2));
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('Version 2 ·').waitFor();
    expect(await page.getByLabel('Resource JSON').count()).toBe(0);
    const history = page.locator('table.history tbody tr');
    expect(await history.evaluateAll((trs) => trs.map((tr) => tr.querySelector('td')?.textContent))).toEqual([
      '2',
      '1',
    ]);
    // Versions 1 and 2 side by side: the changed line on each side.
    const removed = await page.locator('table.compare td.removed').allTextContents();
    const added = await page.locator('table.compare td.added').allTextContents();
    expect(removed).toEqual(expect.arrayContaining(['    "versionId": "1",', '  "birthDate": "1974-12-25",']));
    expect(added).toEqual(expect.arrayContaining(['    "versionId": "2",', '  "birthDate": "1975-01-02",']));
    expect((await api('GET', `/fhir/Patient/${patients.edited.id}`)).body.birthDate).toBe('1975-01-02');
    expect(violations).toEqual([]);
    await context.close();
  }, 60_000);

  it('creates a Patient with New, and deletes one only after confirmation', async () => {
    const { page, context } = await newPage();
    await page.goto(`${server.url}/console/resources`);
    await signIn(page);
    await page.getByLabel('Resource type').selectOption('Patient');
    await page.getByRole('button', { name: 'New' }).click();
    const editor = page.getByLabel('Resource JSON');
    expect(JSON.parse(await editor.inputValue())).toEqual({ resourceType: 'Patient' });
    await editor.fill(JSON.stringify({ resourceType: 'Patient', name: [{ family, given: ['Dan'] }] }));
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('Version 1 ·').waitFor();
    const createdId = new URL(page.url()).pathname.split('/').pop()!;
    expect((await api('GET', `/fhir/Patient/${createdId}`)).body.name[0].given).toEqual(['Dan']);

    await page.goto(`${server.url}/console/resources/Patient/${patients.deleted.id}`);
    await signIn(page);
    await page.getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('alertdialog');
    expect(await dialog.getByRole('heading').textContent()).toBe(`Delete Patient/${patients.deleted.id}?`);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await page.getByRole('alertdialog').count()).toBe(0);
    expect((await api('GET', `/fhir/Patient/${patients.deleted.id}`)).status).toBe(200);

    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Yes, delete' }).click();
    await page.getByLabel('Search parameters').waitFor();
    expect((await api('GET', `/fhir/Patient/${patients.deleted.id}`)).status).toBe(410);
    await context.close();
  }, 60_000);

  it('finds codes with $expand in the editor, inserts one at the cursor and shows an unknown value set as text', async () => {
    const { page, context, violations } = await newPage();
    await page.goto(`${server.url}/console/resources`);
    await signIn(page);
    await page.getByLabel('Resource type').selectOption('Patient');
    await page.getByRole('button', { name: 'New' }).click();
    const gender = 'http://hl7.org/fhir/ValueSet/administrative-gender';
    // Offered: the value set of Patient's one top-level required binding.
    expect(
      await page.locator('#code-value-sets option').evaluateAll((os) => os.map((o) => o.getAttribute('value'))),
    ).toEqual([gender]);
    const editor = page.getByLabel('Resource JSON');
    await editor.fill(`{"resourceType": "Patient", "name": [{"family": "${family}", "given": ["Eve"]}], "gender": }`);
    // The cursor before the closing brace, where the code goes (fill leaves it at the end).
    await editor.press('ArrowLeft');
    const picker = page.getByRole('form', { name: 'Codes' });
    await picker.getByLabel('Value set', { exact: true }).fill(gender);
    await picker.getByLabel('Filter', { exact: true }).fill('fem');
    await picker.getByRole('button', { name: 'Find codes' }).click();
    const found = picker.getByRole('list', { name: 'Codes found' }).getByRole('listitem');
    await found.first().waitFor();
    // Each code: its code, display and system, and its Insert button.
    expect(await found.evaluateAll((lis) => lis.map((li) => [...li.children].map((c) => c.textContent)))).toEqual([
      ['female', 'Female', 'http://hl7.org/fhir/administrative-gender', 'Insert'],
    ]);
    await screenshots(page, 'code-picker', page.getByRole('heading', { name: 'New Patient' }));
    await picker.getByRole('button', { name: 'Insert female' }).click();
    expect(await editor.inputValue()).toBe(
      `{"resourceType": "Patient", "name": [{"family": "${family}", "given": ["Eve"]}], "gender": "female"}`,
    );
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('Version 1 ·').waitFor();
    const createdId = new URL(page.url()).pathname.split('/').pop()!;
    const created = (await api('GET', `/fhir/Patient/${createdId}`)).body;
    expect([created.gender, created.name[0].given]).toEqual(['female', ['Eve']]);

    // The server's words for a value set it does not know (404) and for one that needs LOINC (422).
    await page.getByRole('button', { name: 'Edit' }).click();
    const unknown = 'http://example.org/fhir/ValueSet/no-such-value-set';
    await picker.getByLabel('Value set', { exact: true }).fill(unknown);
    await picker.getByRole('button', { name: 'Find codes' }).click();
    await picker.getByRole('alert').getByText(unknown, { exact: false }).waitFor();
    expect(await picker.getByRole('alert').textContent()).toBe(`No value set ${unknown} is known to this server`);
    const loinc = 'http://hl7.org/fhir/ValueSet/observation-codes';
    // Enter in the picker's fields asks for codes (an Enter that saved would close the editor, asking nothing).
    await picker.getByLabel('Value set', { exact: true }).fill(loinc);
    await picker.getByLabel('Value set', { exact: true }).press('Enter');
    await picker.getByRole('alert').getByText(loinc, { exact: false }).waitFor();
    expect(await picker.getByRole('alert').textContent()).toMatch(/http:\/\/loinc\.org/);
    expect(await page.getByLabel('Resource JSON').count()).toBe(1);
    expect((await api('GET', `/fhir/Patient/${createdId}`)).body.meta.versionId).toBe('1');
    expect(violations).toEqual([]);
    await context.close();
  }, 60_000);

  it('shows a stored narrative without running its script, its onerror handler or its javascript: link', async () => {
    const { page, context } = await newPage();
    await page.goto(`${server.url}/console/resources/Patient/${patients.hostile.id}`);
    await signIn(page);
    const narrative = page.locator('.narrative');
    await narrative.getByText('Hostile narrative').waitFor();
    const html = await narrative.innerHTML();
    expect(html).not.toMatch(/<script|onerror|javascript:/i);
    // The link is there as text without its address: clicking it goes nowhere and runs nothing.
    await narrative.getByText('open').click();
    expect(new URL(page.url()).pathname).toBe(`/console/resources/Patient/${patients.hostile.id}`);
    // The page still works after the click, and nothing the narrative carried ever ran.
    await page.getByRole('heading', { name: 'JSON', exact: true }).waitFor();
    expect(await page.evaluate('typeof window.__xss')).toBe('undefined');
    await context.close();
  }, 60_000);

  it('offers only the types the scopes allow and shows a 403 as such', async () => {
    const limited = `limited-${randomUUID().slice(0, 8)}`;
    await accounts.create({ username: limited, password, scopes: ['system/Patient.rs'], rateLimit: null });
    const { page, context } = await newPage();
    await page.goto(`${server.url}/console`);
    await signIn(page, limited);
    const options = await page.getByLabel('Resource type').locator('option').allTextContents();
    expect(options).toEqual(['Patient']);
    expect(await page.getByRole('button', { name: 'New' }).count()).toBe(0);
    // An include of a type it may not search: the server's 403, in its words.
    await search(page, 'Patient', `family=${family}&_revinclude=Observation:subject`);
    expect(await page.getByRole('alert').textContent()).toMatch(/^Forbidden: .*Observation/);
    await page.goto(`${server.url}/console/resources/Patient/${patients.second.id}`);
    await signIn(page, limited);
    await page.getByRole('heading', { name: 'History' }).waitFor();
    // What refers to it: only Patients could be asked about (the one request), the rest is said.
    const referring = referringTypes('Patient');
    await page
      .getByText(`(${referring.length - 1} of the ${referring.length} types that can refer to a Patient)`, {
        exact: false,
      })
      .waitFor();
    expect(await page.getByText('No resource of the types searched refers to it.').count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Edit' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Delete' }).count()).toBe(0);
    await context.close();
  }, 60_000);

  it('lists what refers to a Practitioner and an Organization, in few requests, and counts the picked type', async () => {
    const { page, context, violations } = await newPage();
    /** The "Referred to by" searches of one resource's page (another page's may still be under way). */
    const asks: URL[] = [];
    page.on('request', (request) => asks.push(new URL(request.url())));
    const revincludesOf = (type: string, id: string) =>
      asks.filter(
        (url) =>
          url.pathname === `/fhir/${type}` && url.searchParams.get('_id') === id && url.searchParams.has('_revinclude'),
      );
    await page.goto(`${server.url}/console/resources/Practitioner/${referred.practitioner.id}`);
    await signIn(page);
    const referredBy = page.getByRole('list', { name: 'Referred to by' });
    await referredBy.getByRole('link').first().waitFor();
    expect(await referredBy.getByRole('link').allTextContents()).toEqual([
      `Encounter/${referred.encounter.id}`,
      `Observation/${referred.observation.id}`,
    ]);
    // Every type that can refer to a Practitioner, 16 a request: 5 requests for R4's 75.
    const practitionerSources = referringTypes('Practitioner');
    const practitionerSearches = revincludesOf('Practitioner', referred.practitioner.id);
    expect(practitionerSearches).toHaveLength(Math.ceil(practitionerSources.length / 16));
    const asked = practitionerSearches.flatMap((url) => url.searchParams.getAll('_revinclude'));
    expect(asked.sort()).toEqual(practitionerSources.map((t) => `${t}:*`).sort());
    await referredBy.getByRole('link', { name: `Encounter/${referred.encounter.id}` }).click();
    await page.getByRole('heading', { name: `Encounter/${referred.encounter.id}` }).waitFor();
    expect(await page.locator('ul.references').first().getByRole('link').allTextContents()).toEqual([
      `Practitioner/${referred.practitioner.id}`,
    ]);

    await page.goto(`${server.url}/console/resources/Organization/${referred.organization.id}`);
    await signIn(page);
    await referredBy.getByRole('link').first().waitFor();
    expect(await referredBy.getByRole('link').allTextContents()).toEqual([`Patient/${referred.managed.id}`]);
    expect(revincludesOf('Organization', referred.organization.id)).toHaveLength(
      Math.ceil(referringTypes('Organization').length / 16),
    );
    await page.goto(`${server.url}/console/resources/Organization/${referred.otherOrganization.id}`);
    await signIn(page);
    await page.getByText('No resource on this server refers to it.').waitFor();

    // The picked type's count (`_summary=count`), next to the picker; the search's total above the table.
    const organizations = (await api('GET', '/fhir/Organization?_summary=count')).body.total;
    const practitioners = (await api('GET', '/fhir/Practitioner?_summary=count')).body.total;
    expect([organizations, practitioners]).toEqual([2, 1]);
    await page.getByRole('link', { name: 'Resources' }).click();
    const count = page.locator('#type-count');
    await page.getByLabel('Resource type').selectOption('Organization');
    await count.getByText(`${organizations} in all`, { exact: true }).waitFor();
    await page.getByLabel('Resource type').selectOption('Practitioner');
    await count.getByText(`${practitioners} in all`, { exact: true }).waitFor();
    expect(await page.getByLabel('Resource type').getAttribute('aria-describedby')).toBe('type-count');
    await search(page, 'Organization', '');
    await page.getByText(`${organizations} matches`, { exact: true }).waitFor();
    expect(violations).toEqual([]);
    await context.close();
  }, 60_000);

  it('submits a scribe visit, follows the record until its note is written and links its DocumentReference', async () => {
    const { page, context, violations } = await newPage();
    await page.goto(`${server.url}/console/scribe`);
    await signIn(page);
    await page.getByRole('button', { name: 'New visit' }).click();
    await page
      .getByLabel('Transcript')
      .fill(
        'Doctor: What brings you in today?\nPatient: A sore throat for three days.\n' +
          'Doctor: Your throat is red. Temperature is 100.8 degrees.\n' +
          'Doctor: This is most likely strep throat.\nDoctor: I will prescribe azithromycin.',
      );
    await page.getByLabel('Template').selectOption({ label: 'SOAP note' });
    await page.getByLabel('Patient name (optional)').fill(`Ada ${family}`);
    await page.getByRole('button', { name: 'Submit' }).click();
    // The record page asks again until the record is COMPLETED, then shows the note's sections.
    const note = page.getByRole('region', { name: 'SOAP note' });
    await note.getByRole('heading', { name: 'SOAP note' }).waitFor();
    expect(await note.getByRole('heading', { level: 3 }).allTextContents()).toEqual([
      'Subjective',
      'Objective',
      'Assessment',
      'Plan',
    ]);
    expect(await note.locator('.note-text').first().textContent()).toContain('A sore throat for three days.');
    expect(await page.locator('.status').first().textContent()).toBe('Completed');
    const scribeId = new URL(page.url()).pathname.split('/').pop()!;
    const record = (await api('GET', `/v1/ambient/api/scribe/${scribeId}`)).body;
    expect(record.status).toBe('COMPLETED');
    await screenshots(page, 'scribe-record');

    await note.getByRole('link', { name: record.notes[0].document_reference }).click();
    await page.getByRole('heading', { name: record.notes[0].document_reference }).waitFor();
    expect(await page.locator('pre.json').textContent()).toContain('"resourceType": "DocumentReference"');

    await page.getByRole('link', { name: 'Scribe' }).click();
    const row = page.locator('tbody tr').filter({ has: page.getByRole('link', { name: scribeId, exact: true }) });
    await row.waitFor();
    expect(await row.locator('td').allTextContents()).toEqual([
      scribeId,
      'Completed',
      expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/),
      `Ada ${family}`,
      'SOAP note',
    ]);
    expect(violations).toEqual([]);
    await context.close();
  }, 60_000);

  it('starts an export of the ticked types, follows it and downloads its file', async () => {
    const { page, context, violations } = await newPage();
    await page.goto(`${server.url}/console/exports`);
    await signIn(page);
    await page.getByRole('checkbox', { name: 'Patient', exact: true }).check();
    await page.getByRole('button', { name: 'Start export' }).click();
    const file = page.getByRole('link', { name: 'Patient-1.ndjson' });
    await file.waitFor();
    await screenshots(page, 'exports');
    const [download] = await Promise.all([page.waitForEvent('download'), file.click()]);
    expect(download.suggestedFilename()).toBe('Patient-1.ndjson');
    const lines = readFileSync((await download.path())!, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(new Set(lines.map((r) => r.resourceType))).toEqual(new Set(['Patient']));
    expect(lines.map((r) => r.id)).toEqual(expect.arrayContaining([patients.edited.id, patients.second.id]));
    expect(violations).toEqual([]);
    await context.close();
  }, 60_000);

  it('signs out, and a revoked token brings back the sign-in form', async () => {
    const { page, context } = await newPage();
    await page.goto(`${server.url}/console`);
    await signIn(page);
    await page.getByRole('link', { name: 'Exports' }).click();
    await page.getByRole('heading', { name: 'Exports' }).waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    expect(await page.getByRole('navigation').count()).toBe(0);

    await signIn(page);
    await page.getByRole('link', { name: 'Resources' }).click();
    // The screen's first search (every Patient) and its type's count answered before the token is revoked.
    await rows(page);
    await page
      .locator('#type-count')
      .getByText(/ in all$/)
      .waitFor();
    await accounts.revokeTokens(username);
    await search(page, 'Patient', `family=${family}`);
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    expect(await page.getByRole('status').textContent()).toMatch(/Signed out: .*token/i);
    await context.close();
    api = apiOf(server.url, await tokenFor(server.url, username, password));
  }, 60_000);

  it('brings back the sign-in form when the token expires, saying so', async () => {
    const context = await browser.newContext({ viewport: VIEWPORTS[0] });
    const page = await context.newPage();
    await page.goto(`${(await shortServer!).url}/console`);
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password').fill(password);
    const token = page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/ambient/api/auth/token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const answer = await token;
    expect(answer.status()).toBe(200);
    expect((await answer.json()).expires_in).toBe(SHORT_TOKEN_TTL);
    // At the token's expiry the console itself ends the session: the sign-in form, saying why.
    await page.getByRole('status').getByText('Your session expired', { exact: false }).waitFor();
    expect(await page.getByRole('button', { name: 'Sign in' }).isVisible()).toBe(true);
    expect(await page.getByRole('navigation').count()).toBe(0);
    await context.close();
  }, 60_000);

  it('asked no other host for anything', () => {
    const origin = new URL(server.url).origin;
    expect(requested.length).toBeGreaterThan(0);
    expect(requested.filter((url) => !url.startsWith(`${origin}/`) && !url.startsWith('data:'))).toEqual([]);
  });
});

afterAll(() => {
  if (HAVE_CHROMIUM) console.log(`[console browser tests] screenshots in ${SHOTS}`);
});
