// Images of prompts and steers (docs/protocol.md §9.2 `images`, §11 Image
// {type: "image", data, mime_type}, data base64): reading a picked, pasted
// or dropped file into one, the page's bounds on them, and drawing one as a
// thumbnail. The page's policy allows images from its own origin and blob:
// URLs only (never data:), so a thumbnail is a blob URL made from the
// bytes, revoked when the thumbnail goes.
//
// In the transcript an image is a content block: with its bytes ({type:
// "image", data, mime_type}), or naming a stored image ({type: "image",
// mime_type, sha256, size}, docs/protocol.md §13 P4) whose bytes the page
// fetches once with get_image (setImageSource) and keeps by digest.

import { useEffect, useMemo, useState } from "../vendor/hooks.mjs";
import { html } from "./html.js";

/** At most this many images in one prompt (protocol.MaxImages). */
export const MAX_IMAGES = 16;

/** The page's bound on one image's bytes. The daemon has its own bounds;
 * this one keeps a prompt of several images well under the 32 MiB record
 * limit (base64 grows bytes by a third). */
export const MAX_IMAGE_BYTES = 5 << 20;

/** The image types a prompt may carry: those both OpenAI-compatible
 * servers and Anthropic take (the daemon refuses others). */
export const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/** Whether a file (or DataTransfer item) is an image of any kind: a paste
 * or drop of one is taken as an attachment (and refused if its type is
 * not one of IMAGE_TYPES), never pasted as text. */
export function isImageType(type) {
  return typeof type === "string" && /^image\/[a-z0-9.+-]+$/i.test(type);
}

/**
 * checkAdd says why files cannot join the images already attached, or ""
 * when they can: too many, too large, or not an image.
 */
export function checkAdd(have, files) {
  if (have.length + files.length > MAX_IMAGES) return `at most ${MAX_IMAGES} images in one prompt`;
  for (const f of files) {
    if (!isImageType(f.type)) return `${f.name || "file"} is not an image`;
    if (!IMAGE_TYPES.includes(f.type)) return `${f.name || "image"} is ${f.type}: only PNG, JPEG, GIF and WebP images can be sent`;
    if (f.size > MAX_IMAGE_BYTES) return `${f.name || "image"} is larger than ${MAX_IMAGE_BYTES >> 20} MiB`;
  }
  return "";
}

let seq = 0;

/** Reads a File into an attachment: the wire Image plus a name and an id. */
export function readImage(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onerror = () => reject(r.error || new Error("cannot read " + file.name));
    r.onload = () => {
      const s = String(r.result);
      const comma = s.indexOf(",");
      resolve({ id: "img" + (++seq), name: file.name || "pasted image", type: "image", mime_type: file.type, data: comma >= 0 ? s.slice(comma + 1) : "" });
    };
    r.readAsDataURL(file);
  });
}

/** The wire form (§11 Image) of an attachment. */
export function wireImage(im) {
  return { type: "image", data: im.data, mime_type: im.mime_type };
}

function blobOf(im) {
  const bin = atob(im.data);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new Blob([bytes], { type: im.mime_type || "application/octet-stream" });
}

let source = null;
/** setImageSource sets how stored images are fetched: fn(sha256) resolves
 * to the Image (get_image's answer). */
export function setImageSource(fn) { source = fn; }

// Stored images by digest: sha256 -> Promise of a blob URL. Bounded: the
// oldest URL is revoked when the cache is full (a thumbnail showing it
// fetches it again on its next mount).
const stored = new Map();
const MAX_STORED = 200;

function storedURL(sha) {
  let p = stored.get(sha);
  if (!p) {
    if (!source) return Promise.reject(new Error("no image source"));
    p = source(sha).then((im) => URL.createObjectURL(blobOf(im)));
    p.catch(() => stored.delete(sha));
    stored.set(sha, p);
    if (stored.size > MAX_STORED) {
      const [old, op] = stored.entries().next().value;
      stored.delete(old);
      op.then((u) => URL.revokeObjectURL(u), () => {});
    }
  }
  return p;
}

/** One image as a thumbnail <img>: from its bytes, or fetched by digest;
 * an image that cannot be drawn is a placeholder. */
export function Thumb({ im, cls, alt }) {
  const own = useMemo(() => {
    if (!im.data) return "";
    try { return URL.createObjectURL(blobOf(im)); } catch { return ""; }
  }, [im.data, im.mime_type]);
  useEffect(() => () => { if (own) URL.revokeObjectURL(own); }, [own]);
  const [fetched, setFetched] = useState({ sha: "", url: "", err: "" });
  useEffect(() => {
    if (im.data || !im.sha256) return undefined;
    let live = true;
    storedURL(im.sha256).then((url) => { if (live) setFetched({ sha: im.sha256, url, err: "" }); },
      (e) => { if (live) setFetched({ sha: im.sha256, url: "", err: e.message || "unavailable" }); });
    return () => { live = false; };
  }, [im.data, im.sha256]);
  const url = own || (fetched.sha === im.sha256 ? fetched.url : "");
  if (!url) {
    const why = im.data ? "undecodable" : fetched.err || (im.sha256 ? "loading" : "no bytes");
    return html`<span class=${"thumb-bad " + (cls || "")} title=${why}>[image ${im.mime_type || ""}]</span>`;
  }
  return html`<img class=${cls || "thumb-img"} src=${url} alt=${alt || "image"} data-mime=${im.mime_type} data-sha256=${im.sha256 || undefined} />`;
}
