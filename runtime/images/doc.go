// Package images keeps the images of a session (docs/protocol.md §13 P4):
// content-addressed files beside the transcript, images/<sha256>.<ext> in
// the session directory, named from the transcript by image content blocks
// ({type:"image", mime_type, sha256, size}). A runtime stores a prompt's
// images before the message naming them is written, reads them back for
// each provider call (so the bytes are never held with the conversation)
// and serves them to get_image. The same image sent twice is one file.
//
// Bounds: an image is at most protocol.MaxImageBytes (5 MiB) decoded and a
// prompt or steer carries at most protocol.MaxImages (16), within one
// record (32 MiB); the protocol package refuses anything more before a
// runtime sees it. The files live as long as the session directory.
package images
