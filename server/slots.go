package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// errRestoreSlot is llama-server's answer to any slot file it cannot restore.
const errRestoreSlot = "Unable to restore slot, no available space in KV cache or invalid slot save file"

// slotBackend returns the backend's slot controls, or a 501 error when it has none.
func (m *loaded) slotBackend() (SlotBackend, error) {
	sb, ok := m.backend.(SlotBackend)
	if !ok {
		return nil, &apiError{typ: errNotSupported, message: "this backend has no slots"}
	}
	return sb, nil
}

// GetSlots implements GET /slots: every slot's state, or with ?fail_on_no_slot=1 a 503 when
// no slot is idle. It answers 501 when disabled (--no-slots). The headers X-Queue-Length and
// X-Queue-Limit tell how many requests wait for a slot and how many may (--max-queue): the
// body stays llama-server's array.
func (s *Server) GetSlots(ctx context.Context, params gen.GetSlotsParams) (*gen.GetSlotsOKHeaders, error) {
	m := s.model()
	if m == nil {
		return nil, errLoading
	}
	if s.cfg.NoSlots {
		return nil, &apiError{typ: errNotSupported, message: "This server does not support slots endpoint. Start it with `--slots`"}
	}
	sb, err := m.slotBackend()
	if err != nil {
		return nil, err
	}
	infos, err := sb.Slots(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]gen.SlotInfo, 0, len(infos))
	idle := 0
	for _, in := range infos {
		if !in.Processing {
			idle++
		}
		out = append(out, slotInfo(in, m.info.SpecType))
	}
	// As llama-server: the parameter counts when it has a value.
	if v, _ := params.FailOnNoSlot.Get(); v != "" && idle == 0 {
		return nil, &apiError{typ: errUnavailable, message: "no slot available"}
	}
	res := &gen.GetSlotsOKHeaders{Response: out}
	if stb, ok := m.backend.(StatsBackend); ok {
		st := stb.Stats()
		res.XQueueLength, res.XQueueLimit = st.Deferred, st.MaxQueue
	}
	return res, nil
}

// slotInfo converts a slot's state to llama-server's slot object; spec is the engine's
// speculative decoding method.
func slotInfo(in engine.SlotInfo, spec engine.SpecType) gen.SlotInfo {
	out := gen.SlotInfo{ID: in.ID, NCtx: in.NCtx, Speculative: spec != engine.SpecNone, IsProcessing: in.Processing}
	if t := in.Task; t != nil {
		out.IDTask = gen.NewOptInt(t.ID)
		out.NPromptTokens = gen.NewOptInt(t.NPromptTokens)
		out.NPromptTokensProcessed = gen.NewOptInt(t.NPromptProcessed)
		out.NPromptTokensCache = gen.NewOptInt(t.NPromptCached)
		out.Params = gen.NewOptSlotParams(slotParams(t.Params, t.Stream, spec))
		out.NextToken = []gen.SlotNextToken{{
			HasNextToken: t.HasNextToken,
			HasNewLine:   t.HasNewLine,
			NRemain:      t.NRemain,
			NDecoded:     t.NDecoded,
		}}
	}
	return out
}

// SlotAction implements POST /slots/{id_slot}?action=save|restore|erase. It answers 501 unless
// the server has a slot directory (--slot-save-path); files are named by the body's
// "filename", which must be a plain file name (validFilename).
func (s *Server) SlotAction(ctx context.Context, req gen.OptSlotActionRequest, params gen.SlotActionParams) (*gen.SlotActionResponse, error) {
	m := s.model()
	if m == nil {
		return nil, errLoading
	}
	if s.cfg.SlotSavePath == "" {
		return nil, &apiError{typ: errNotSupported, message: "This server does not support slots action. Start it with `--slot-save-path`"}
	}
	id, err := strconv.Atoi(params.IDSlot)
	if err != nil {
		return nil, invalidRequest("Invalid slot ID")
	}
	sb, err := m.slotBackend()
	if err != nil {
		return nil, err
	}
	action, _ := params.Action.Get()
	if action == "erase" {
		n, err := sb.EraseSlot(ctx, id)
		if err != nil {
			return nil, err
		}
		return &gen.SlotActionResponse{IDSlot: id, NErased: gen.NewOptInt(n)}, nil
	}
	if action != "save" && action != "restore" {
		return nil, invalidRequest("Invalid action")
	}
	name, ok := req.Value.Filename.Get()
	if !req.Set || !ok {
		return nil, invalidRequest("'filename' is required")
	}
	if !validFilename(name) {
		return nil, invalidRequest("Invalid filename")
	}
	path := filepath.Join(s.cfg.SlotSavePath, name)
	if action == "save" {
		f, err := sb.SaveSlot(ctx, id, path)
		if err != nil {
			return nil, slotFileError("save", id, name, err)
		}
		return &gen.SlotActionResponse{IDSlot: id, Filename: gen.NewOptString(name),
			NSaved: gen.NewOptInt(f.Tokens), NWritten: gen.NewOptInt64(f.Bytes),
			Timings: gen.NewOptSlotActionTimings(gen.SlotActionTimings{SaveMs: gen.NewOptFloat64(ms(f))})}, nil
	}
	f, err := sb.RestoreSlot(ctx, id, path)
	if errors.Is(err, engine.ErrSlotFile) {
		s.logger.Warn("slot restore failed", "slot", id, "file", name, "err", err)
		return nil, &apiError{typ: errInvalidRequest, message: errRestoreSlot, cause: err}
	}
	if err != nil {
		return nil, slotFileError("restore", id, name, err)
	}
	return &gen.SlotActionResponse{IDSlot: id, Filename: gen.NewOptString(name),
		NRestored: gen.NewOptInt(f.Tokens), NRead: gen.NewOptInt64(f.Bytes),
		Timings: gen.NewOptSlotActionTimings(gen.SlotActionTimings{RestoreMs: gen.NewOptFloat64(ms(f))})}, nil
}

// slotFileError is a failed save or restore as the client may see it: the file named as the
// client gave it, never with the server's directory, which file system errors spell out (the
// log keeps the whole error as the cause).
func slotFileError(action string, id int, name string, err error) error {
	var (
		pathErr *fs.PathError
		linkErr *os.LinkError
	)
	var reason error
	switch {
	case errors.As(err, &pathErr):
		reason = pathErr.Err
	case errors.As(err, &linkErr):
		reason = linkErr.Err
	default:
		return err
	}
	to := "to"
	if action == "restore" {
		to = "from"
	}
	return &apiError{typ: errServer, cause: err, message: fmt.Sprintf("failed to %s slot %d %s %q: %v", action, id, to, name, reason)}
}

func ms(f engine.SlotFile) float64 { return float64(f.Took.Microseconds()) / 1e3 }

// validFilename applies llama.cpp's fs_validate_filename (without subdirectories): 1 to 255
// bytes of valid, shortest-form UTF-8 with no control characters, no / \ : * ? " < > |, none of
// their Unicode look-alikes, surrogates, U+FFFD or a BOM; no leading or trailing space, no
// trailing dot, no ".." anywhere and not ".".
func validFilename(name string) bool {
	if len(name) == 0 || len(name) > 255 || !utf8.ValidString(name) {
		return false // Go's UTF-8 check also refuses overlong forms and surrogates
	}
	for _, c := range name {
		switch {
		case c <= 0x1f, c == 0x7f, c >= 0x80 && c <= 0x9f, // control characters
			c == 0xff0e, c == 0x2215, c == 0x2216, // full stop, slash and backslash look-alikes
			c == 0xfffd, c == 0xfeff, // replacement character, byte order mark
			strings.ContainsRune(`/\:*?"<>|`, c):
			return false
		}
	}
	if name[0] == ' ' || name[len(name)-1] == ' ' || name[len(name)-1] == '.' {
		return false
	}
	return !strings.Contains(name, "..") && name != "."
}
