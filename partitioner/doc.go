// Package partitioner cuts record batches into Flight frames that fit a target's message limit, and
// bounds the bytes in flight between the readers and the wire.
//
// # Frames
//
// An [Encoder] encodes batches of one schema (the table's canonical Arrow schema) with Arrow IPC into
// [Frame]s: the exact DataHeader (IPC message flatbuffer) and DataBody bytes of a FlightData message.
// The size of a frame is measured on its encoded bytes, never estimated: Encode guesses how many rows
// fit from what it has seen so far, encodes them, and cuts again when the result is still too large,
// so every frame it emits is at most the limit. A single row larger than the limit is an error
// wrapping [ErrRowTooLarge] that says how large it is.
//
// Frames are self-contained given the schema message ([Encoder.SchemaMessage]): [Encoder.Decode]
// turns one back into a record batch, which the wire side uses to re-slice a frame whose rows were
// only partly acknowledged. Bodies may be LZ4 or ZSTD compressed (IPC per-buffer compression, as the
// Zerobus SDKs do). Dictionary-encoded columns are refused: the target never receives
// DictionaryBatch messages, and schemamatch decodes dictionaries before batches get here.
//
// # Ownership
//
// Encode never retains the batch it is given; the caller keeps ownership and releases it. A frame's
// bytes are ordinary Go memory owned by whoever holds the frame. A batch returned by Decode belongs to
// the caller, who must Release it; it may reference the frame's body bytes, so the frame's bytes must
// not be modified while it is alive.
//
// # Backpressure
//
// A [Budget] bounds the bytes of frames that exist at once. Producers Acquire a frame's Size before
// handing it to the wire and the wire side Releases it once the frame is durably acknowledged, so a
// slow target blocks the readers instead of growing memory. Waiters are served first come, first
// served, so one large frame is not starved by a stream of small ones; a request larger than the whole
// budget is admitted alone.
//
// # Concurrency
//
// Encoder and Budget are safe for concurrent use. Encoders keep a small pool of IPC writers so that
// compressor state is reused across calls.
package partitioner
