import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../../definitions/registry.js';
import { shapeCatalog } from '../../validation/shapes.js';
import { MAX_JSON_DEPTH, MAX_JSON_VALUES } from '../json-limits.js';
import { MAX_XML_DEPTH, resourceFromXml, xmlRootElement } from './from-xml.js';

const catalog = shapeCatalog(loadR4Definitions());
const read = (xml: string | Uint8Array) => resourceFromXml(xml, catalog, 'The request body');
const FHIR = 'xmlns="http://hl7.org/fhir"';
const XHTML = 'xmlns="http://www.w3.org/1999/xhtml"';

/** The AppError a read throws: its code and status, and its message. */
function refusal(xml: string | Uint8Array): { code: string; status: number; message: string } {
  try {
    read(xml);
  } catch (error) {
    const { code, status, message } = error as { code: string; status: number; message: string };
    return { code, status, message };
  }
  throw new Error('expected a refusal');
}

describe('resourceFromXml: reading FHIR R4 XML', () => {
  it('reads values by their types: strings, booleans and numbers as JSON has them', () => {
    const resource = read(
      `<?xml version="1.0" encoding="UTF-8"?>
      <Observation ${FHIR} xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://hl7.org/fhir x.xsd">
        <!-- a comment --><?pi ignored?>
        <id value="o1"/>
        <status value="final"/>
        <code><text value="a &amp; b &#x263A;"/></code>
        <valueQuantity><value value="1.50"/><unit value="kg"/></valueQuantity>
        <component><code><text value="c"/></code><valueBoolean value="true"/></component>
        <component><code><text value="d"/></code><valueInteger value="-7"/></component>
      </Observation>`,
    );
    expect(resource).toStrictEqual({
      resourceType: 'Observation',
      id: 'o1',
      status: 'final',
      code: { text: 'a & b ☺' },
      valueQuantity: { value: 1.5, unit: 'kg' },
      component: [
        { code: { text: 'c' }, valueBoolean: true },
        { code: { text: 'd' }, valueInteger: -7 },
      ],
    });
  });

  it('leaves a value that is not its type as a string, for the validator to refuse as in JSON', () => {
    const resource = read(
      `<Patient ${FHIR}><active value="yes"/><multipleBirthInteger value="0x10"/><birthDate value=" 1970"/></Patient>`,
    );
    expect(resource).toStrictEqual({
      resourceType: 'Patient',
      active: 'yes',
      multipleBirthInteger: '0x10',
      birthDate: ' 1970',
    });
  });

  it("reads a primitive's id and extensions into `_name`, repeats aligned with nulls", () => {
    const resource = read(
      `<Patient ${FHIR}><name><given value="A"/><given><extension url="http://u"><valueString value="B"/></extension></given>` +
        `<given id="c" value="C"/></name><birthDate id="b"><extension url="http://e"><valueCode value="x"/></extension></birthDate>` +
        `<address><line><extension url="http://l"><valueString value="L"/></extension></line></address></Patient>`,
    );
    expect(resource).toStrictEqual({
      resourceType: 'Patient',
      name: [
        {
          given: ['A', null, 'C'],
          _given: [null, { extension: [{ url: 'http://u', valueString: 'B' }] }, { id: 'c' }],
        },
      ],
      _birthDate: { id: 'b', extension: [{ url: 'http://e', valueCode: 'x' }] },
      // A repeat with extensions only: its values are left out, as JSON may.
      address: [{ _line: [{ extension: [{ url: 'http://l', valueString: 'L' }] }] }],
    });
  });

  it('reads wrapped resources, arrays by cardinality, elements in any order', () => {
    const resource = read(
      `<Bundle ${FHIR}><type value="collection"/><entry><resource><Patient><active value="true"/>` +
        `<contained><Organization><name value="O"/></Organization></contained><id value="p"/></Patient></resource></entry></Bundle>`,
    );
    expect(resource).toStrictEqual({
      resourceType: 'Bundle',
      type: 'collection',
      entry: [
        {
          resource: {
            resourceType: 'Patient',
            active: true,
            contained: [{ resourceType: 'Organization', name: 'O' }],
            id: 'p',
          },
        },
      ],
    });
  });

  it('keeps the narrative as its own XHTML text, entities and whitespace included', () => {
    const div = `<div ${XHTML}>\n  <p class="x">a &amp; b&#160;<br/></p>\n  <svg xmlns="http://www.w3.org/2000/svg" xmlns:xl="http://www.w3.org/1999/xlink"><a xl:href="#x"/></svg></div>`;
    const resource = read(`<Patient ${FHIR}><text><status value="generated"/>${div}</text></Patient>`);
    expect(resource).toStrictEqual({ resourceType: 'Patient', text: { status: 'generated', div } });
    // Characters outside the BMP before and inside it: the div is cut by string positions.
    const astral = `<div ${XHTML}><p>😀 &#x1F600;</p></div>`;
    const withAstral = read(
      `<Patient ${FHIR}><meta><tag><display value="😀😀"/></tag></meta><text><status value="generated"/>${astral}</text></Patient>`,
    );
    expect(withAstral).toStrictEqual({
      resourceType: 'Patient',
      meta: { tag: [{ display: '😀😀' }] },
      text: { status: 'generated', div: astral },
    });
    expect(read(`<Patient ${FHIR}><text><status value="empty"/><div ${XHTML}/></text></Patient>`)).toStrictEqual({
      resourceType: 'Patient',
      text: { status: 'empty', div: `<div ${XHTML}/>` },
    });
  });

  it('carries an element the definitions lack under its name, for the validator to refuse', () => {
    expect(read(`<Patient ${FHIR}><colour value="blue"/><pet><name value="Rex"/></pet></Patient>`)).toStrictEqual({
      resourceType: 'Patient',
      colour: 'blue',
      pet: { name: 'Rex' },
    });
    expect(read(`<Unicorn ${FHIR}><horn value="1"/></Unicorn>`)).toStrictEqual({ resourceType: 'Unicorn', horn: '1' });
  });

  it('gives undefined for a blank body', () => {
    expect(read('')).toBeUndefined();
    expect(read(' \n ')).toBeUndefined();
  });
});

describe('resourceFromXml: refusals (400 invalid-xml unless said)', () => {
  it('refuses any DOCTYPE: external entities (XXE), entity expansion (billion laughs), plain DTDs', () => {
    const xxe = `<?xml version="1.0"?><!DOCTYPE Patient [<!ENTITY x SYSTEM "file:///etc/passwd">]><Patient ${FHIR}><name><family value="&x;"/></name></Patient>`;
    const laughs =
      '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">' +
      Array.from({ length: 9 }, (_, i) => `<!ENTITY lol${i + 1} "${`&lol${i === 0 ? '' : i};`.repeat(10)}">`).join('') +
      `]><Patient ${FHIR}><name><family value="&lol9;"/></name></Patient>`;
    const dtd = `<!DOCTYPE Patient SYSTEM "http://example.org/fhir.dtd"><Patient ${FHIR}/>`;
    for (const xml of [xxe, laughs, dtd]) {
      expect(refusal(xml)).toEqual({ code: 'invalid-xml', status: 400, message: expect.stringMatching(/DOCTYPE/) });
    }
  });

  it("refuses entities other than XML's five (no DTD declares any)", () => {
    expect(refusal(`<Patient ${FHIR}><name><family value="&nbsp;"/></name></Patient>`)).toMatchObject({
      code: 'invalid-xml',
      message: expect.stringMatching(/not well-formed XML/),
    });
  });

  it('refuses XML that is not well-formed, and bytes that are not UTF-8', () => {
    for (const xml of [
      `<Patient ${FHIR}>`,
      `<Patient ${FHIR}></Observation>`,
      `<Patient ${FHIR}/><Patient ${FHIR}/>`,
      '{"resourceType":"Patient"}',
    ]) {
      expect(refusal(xml).code, xml).toBe('invalid-xml');
    }
    expect(refusal(Buffer.from([0x3c, 0x50, 0xff, 0x3e])).message).toMatch(/UTF-8/);
    expect(refusal(`<?xml version="1.0" encoding="ISO-8859-1"?><Patient ${FHIR}/>`).message).toMatch(/UTF-8/);
  });

  it('refuses elements outside the FHIR namespace, and a narrative outside XHTML', () => {
    expect(refusal('<Patient/>').message).toMatch(/not in the FHIR namespace/);
    expect(refusal(`<Patient ${FHIR}><x:active xmlns:x="urn:other" value="true"/></Patient>`).message).toMatch(
      /not in the FHIR namespace/,
    );
    expect(refusal(`<Patient ${FHIR}><text><status value="generated"/><div>x</div></text></Patient>`).message).toMatch(
      /XHTML <div>/,
    );
    expect(
      refusal(
        `<Patient ${FHIR} xmlns:h="http://www.w3.org/1999/xhtml"><text><status value="generated"/><h:div>x</h:div></text></Patient>`,
      ).message,
    ).toMatch(/<div xmlns=/);
    expect(
      refusal(
        `<Patient ${FHIR} xmlns:xl="http://www.w3.org/1999/xlink"><text><status value="generated"/><div ${XHTML}><a xl:href="#"/></div></text></Patient>`,
      ).message,
    ).toMatch(/prefix xl declared outside/);
  });

  it('refuses text where FHIR has value attributes, and attributes FHIR does not define', () => {
    expect(refusal(`<Patient ${FHIR}><gender>male</gender></Patient>`).message).toMatch(/holds text/);
    expect(refusal(`<Patient ${FHIR}><gender><![CDATA[male]]></gender></Patient>`).message).toMatch(/holds text/);
    expect(refusal(`<Patient ${FHIR} id="p"/>`).message).toMatch(/attribute id/);
    expect(refusal(`<Patient ${FHIR}><gender value="male" colour="blue"/></Patient>`).message).toMatch(
      /attribute colour/,
    );
    expect(refusal(`<Patient ${FHIR}><name value="x"/></Patient>`).message).toMatch(/attribute value/);
    expect(refusal(`<Patient ${FHIR}><name><id value="n"/></name></Patient>`).message).toMatch(
      /id of <name> is an attribute/,
    );
    expect(refusal(`<Patient ${FHIR}><gender value="male"><family value="x"/></gender></Patient>`).message).toMatch(
      /holds only extensions/,
    );
  });

  it('refuses a resource wrapper without exactly one resource', () => {
    expect(refusal(`<Patient ${FHIR}><contained/></Patient>`).message).toMatch(/must hold a resource/);
    expect(refusal(`<Patient ${FHIR}><contained><Organization/><Organization/></contained></Patient>`).message).toMatch(
      /more than one resource/,
    );
  });

  it(`refuses nesting deeper than ${MAX_XML_DEPTH} elements, or than ${MAX_JSON_DEPTH} levels once JSON`, () => {
    const nested = (depth: number) =>
      `<Patient ${FHIR}>${'<extension url="u">'.repeat(depth)}${'</extension>'.repeat(depth)}</Patient>`;
    expect(() => read(nested(MAX_XML_DEPTH - 1))).toThrow(/as JSON/);
    expect(refusal(nested(MAX_XML_DEPTH)).message).toMatch(/nested deeper than 64 levels/);
    expect(refusal(nested(100_000)).message).toMatch(/nested deeper than 64 levels/);
    // 31 nested extensions are 63 levels of JSON (an object and an array each): the most JSON allows.
    expect(() => read(nested(31))).not.toThrow();
  });

  it(`refuses more than ${MAX_JSON_VALUES.toLocaleString('en-US')} elements with 413, at the one past the bound`, () => {
    const many = `<Patient ${FHIR}><pet>${'<a/>'.repeat(MAX_JSON_VALUES + 10)}</pet></Patient>`;
    expect(refusal(many)).toMatchObject({ code: 'payload-too-large', status: 413 });
  });
});

describe('xmlRootElement', () => {
  it('names the root element, reading no further', () => {
    expect(xmlRootElement(Buffer.from(`<?xml version="1.0"?><!-- c --><Binary ${FHIR}><unclosed>`))).toEqual({
      local: 'Binary',
      uri: 'http://hl7.org/fhir',
    });
    expect(xmlRootElement(Buffer.from('<ClinicalDocument xmlns="urn:hl7-org:v3"/>'))).toEqual({
      local: 'ClinicalDocument',
      uri: 'urn:hl7-org:v3',
    });
  });

  it('is undefined for a DOCTYPE (never a FHIR resource), bytes that are not XML or not UTF-8', () => {
    expect(xmlRootElement(Buffer.from(`<!DOCTYPE x [<!ENTITY e "e">]><Binary ${FHIR}/>`))).toBeUndefined();
    expect(xmlRootElement(Buffer.from('not xml'))).toBeUndefined();
    expect(xmlRootElement(Buffer.from([0xff, 0xfe, 0x3c]))).toBeUndefined();
  });
});
