import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../../definitions/registry.js';
import { shapeCatalog } from '../../validation/shapes.js';
import { narrativeXhtml, resourceToXml } from './to-xml.js';

const catalog = shapeCatalog(loadR4Definitions());
const write = (resource: Record<string, unknown>, pretty = false) => resourceToXml(resource, catalog, { pretty });
/** The document without its XML declaration. */
const body = (resource: Record<string, unknown>) => write(resource).replace(/^<\?xml[^>]*\?>/, '');

describe('resourceToXml (https://hl7.org/fhir/R4/xml.html)', () => {
  it('names the resource by its type in the FHIR namespace, with an XML declaration', () => {
    expect(write({ resourceType: 'Patient', active: true })).toBe(
      '<?xml version="1.0" encoding="UTF-8"?><Patient xmlns="http://hl7.org/fhir"><active value="true"/></Patient>',
    );
    expect(body({ resourceType: 'Patient' })).toBe('<Patient xmlns="http://hl7.org/fhir"/>');
  });

  it("writes elements in the definitions' order, whatever the JSON's key order", () => {
    const xml = body({
      resourceType: 'Patient',
      gender: 'male',
      name: [{ given: ['A'], family: 'F' }],
      id: 'p1',
      birthDate: '1970',
    });
    expect(xml).toBe(
      '<Patient xmlns="http://hl7.org/fhir"><id value="p1"/><name><family value="F"/><given value="A"/></name>' +
        '<gender value="male"/><birthDate value="1970"/></Patient>',
    );
  });

  it("carries a primitive's id and extensions (`_name`), aligned in repeats with nulls", () => {
    const xml = body({
      resourceType: 'Patient',
      _birthDate: { id: 'b', extension: [{ url: 'http://e', valueCode: 'x' }] },
      name: [
        {
          given: ['A', null, 'C'],
          _given: [null, { extension: [{ url: 'http://u', valueString: 'B' }] }, { id: 'c' }],
        },
      ],
    });
    expect(xml).toBe(
      '<Patient xmlns="http://hl7.org/fhir"><name><given value="A"/>' +
        '<given><extension url="http://u"><valueString value="B"/></extension></given>' +
        '<given id="c" value="C"/></name>' +
        '<birthDate id="b"><extension url="http://e"><valueCode value="x"/></extension></birthDate></Patient>',
    );
  });

  it("writes an element's id and an extension's url as attributes, a resource's id as an element", () => {
    const xml = body({
      resourceType: 'Observation',
      id: 'o',
      status: 'final',
      code: { id: 'c1', text: 't', extension: [{ id: 'e1', url: 'http://x', valueBoolean: false }] },
    });
    expect(xml).toBe(
      '<Observation xmlns="http://hl7.org/fhir"><id value="o"/><status value="final"/>' +
        '<code id="c1"><extension id="e1" url="http://x"><valueBoolean value="false"/></extension>' +
        '<text value="t"/></code></Observation>',
    );
  });

  it('keeps choice names, numbers and booleans as JSON has them', () => {
    const xml = body({
      resourceType: 'Observation',
      status: 'final',
      code: { text: 't' },
      valueQuantity: { value: 1.5, unit: 'kg' },
      component: [
        { code: { text: 'c' }, valueInteger: -3 },
        { code: { text: 'd' }, valueQuantity: { value: 1e-22 } },
      ],
    });
    expect(xml).toContain('<valueQuantity><value value="1.5"/><unit value="kg"/></valueQuantity>');
    expect(xml).toContain('<valueInteger value="-3"/>');
    expect(xml).toContain('<value value="1e-22"/>');
  });

  it('wraps resources held by another: contained, Bundle entries, an entry response outcome', () => {
    const xml = body({
      resourceType: 'Bundle',
      type: 'batch-response',
      entry: [
        {
          resource: { resourceType: 'Patient', id: 'p', contained: [{ resourceType: 'Organization', name: 'O' }] },
          response: {
            status: '400',
            outcome: { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'invalid' }] },
          },
        },
      ],
    });
    expect(xml).toBe(
      '<Bundle xmlns="http://hl7.org/fhir"><type value="batch-response"/><entry><resource><Patient><id value="p"/>' +
        '<contained><Organization><name value="O"/></Organization></contained></Patient></resource>' +
        '<response><status value="400"/><outcome><OperationOutcome><issue><severity value="error"/>' +
        '<code value="invalid"/></issue></OperationOutcome></outcome></response></entry></Bundle>',
    );
  });

  it('escapes text so that a parser reads back the same string', () => {
    const xml = body({ resourceType: 'Patient', name: [{ text: 'a & b < c > d " e \' f\tg\nh\ri' }] });
    expect(xml).toContain('<text value="a &amp; b &lt; c &gt; d &quot; e \' f&#x9;g&#xA;h&#xD;i"/>');
  });

  it('writes characters XML cannot hold (a control character an error message quotes) as U+FFFD', () => {
    const xml = body({
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'error', code: 'invalid', diagnostics: 'bad \u0001 and \uFFFF and \uD800' }],
    });
    expect(xml).toContain('<diagnostics value="bad \uFFFD and \uFFFD and \uFFFD"/>');
  });

  it('indents with _pretty, the narrative kept on its line as it is', () => {
    const div = '<div xmlns="http://www.w3.org/1999/xhtml"><p>x</p>\n  <p>y</p></div>';
    expect(write({ resourceType: 'Patient', text: { status: 'generated', div }, active: true }, true)).toBe(
      [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<Patient xmlns="http://hl7.org/fhir">',
        '  <text>',
        '    <status value="generated"/>',
        `    ${div}`,
        '  </text>',
        '  <active value="true"/>',
        '</Patient>',
      ].join('\n'),
    );
  });

  it('refuses (as a bug, a plain Error) JSON that is not R4', () => {
    expect(() => write({ resourceType: 'Patient', colour: 'blue' })).toThrow(/Patient\.colour/);
    expect(() => write({ resourceType: 'NotAType' })).toThrow(/not an R4 resource type/);
    expect(() => write({ resourceType: 'Patient', name: 'x' })).toThrow(/expected a JSON object/);
  });
});

describe('narrativeXhtml', () => {
  it('keeps a well-formed XHTML div as it is', () => {
    const div = '<div xmlns="http://www.w3.org/1999/xhtml"><p class="a">&amp;&#160;<br/></p></div>';
    expect(narrativeXhtml(div)).toBe(div);
  });

  it('puts a div that names no namespace into XHTML', () => {
    expect(narrativeXhtml('<div><b>x</b></div>')).toBe('<div xmlns="http://www.w3.org/1999/xhtml"><b>x</b></div>');
  });

  it('writes XHTML that is not well-formed (the JSON side checks only `<div`) as escaped text', () => {
    for (const div of [
      '<div>a &nbsp; b</div>',
      '<div><p>unclosed</div>',
      '<div>a</div><script/>',
      '<?xml version="1.0"?><div xmlns="http://www.w3.org/1999/xhtml">x</div>',
    ]) {
      expect(narrativeXhtml(div)).toBe(
        `<div xmlns="http://www.w3.org/1999/xhtml">${div.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')}</div>`,
      );
    }
    expect(narrativeXhtml('<div xmlns="http://example.org/other">x</div>')).toMatch(
      /^<div xmlns="http:\/\/www.w3.org\/1999\/xhtml">&lt;div/,
    );
  });
});
