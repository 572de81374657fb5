// Narrative XHTML is whatever a client stored: untrusted. It is shown only after DOMPurify keeps what is
// safe HTML (no script, no event handler attributes, no javascript: URLs, no forms, no styles). The
// page's Content-Security-Policy is the second wall: it would refuse inline script and inline styles, and
// images from other hosts, even if something got through.
import DOMPurify from 'dompurify';

// An image in a narrative shows only when it is inline (data:): a relative or remote address would make
// the browser ask this server's console paths, or another host, for it.
DOMPurify.addHook('uponSanitizeAttribute', (_node, data) => {
  if (data.attrName === 'src' && !/^data:image\/(png|gif|jpeg|webp);/i.test(data.attrValue)) data.keepAttr = false;
});

export function sanitiseNarrative(xhtml: string): string {
  return DOMPurify.sanitize(xhtml, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
    FORBID_ATTR: ['style', 'srcset', 'action', 'formaction'],
  });
}
