package server

import (
	"context"

	"github.com/wgpu-llama/wgpu-llama/gen"
)

// GetHealth implements GET /health: {"status":"ok"} once the model is loaded (requireBackend
// answers 503 "Loading model" before that).
func (s *Server) GetHealth(context.Context) (*gen.HealthResponse, error) {
	m := s.model()
	if m == nil {
		return nil, errLoading
	}
	if hb, ok := m.backend.(HealthBackend); ok {
		if err := hb.Health(); err != nil {
			return nil, &apiError{typ: errUnavailable, cause: err, message: err.Error()}
		}
	}
	return &gen.HealthResponse{Status: "ok"}, nil
}

// GetHealthAlias implements GET /v1/health, llama-server's alias of /health.
func (s *Server) GetHealthAlias(ctx context.Context) (*gen.HealthResponse, error) {
	return s.GetHealth(ctx)
}

// ListModels implements GET /v1/models: the loaded model in OpenAI's list ("data") and in
// llama-server's ollama-style list ("models").
func (s *Server) ListModels(context.Context) (*gen.ModelsResponse, error) {
	m := s.model()
	if m == nil {
		return nil, errLoading
	}
	info := m.info
	meta := gen.ModelMeta{
		VocabType: m.tok != nil,
		NVocab:    info.NVocab,
		NCtx:      info.NCtx,
		NCtxTrain: info.NCtxTrain,
		NEmbd:     info.NEmbd,
		NParams:   int64(info.NParams),
		Size:      int64(info.Size),
		Ftype:     info.FileType,
	}
	data := []gen.ModelEntry{{
		ID:      m.name,
		Aliases: s.aliases(),
		Tags:    nonNilStrings(s.cfg.Tags),
		Object:  "model",
		Created: m.created,
		OwnedBy: "llamacpp", // as llama-server, which some clients key on
		Meta:    meta,
	}}
	// Each LoRA adapter is a model of its own to a client (vLLM's listing): the model field
	// that names it runs it (adapterNamed).
	if lb, ok := m.backend.(LoraBackend); ok {
		for _, a := range lb.Adapters() {
			data = append(data, gen.ModelEntry{
				ID: a.Name, Aliases: []string{}, Tags: []string{}, Object: "model", Created: m.created, OwnedBy: "llamacpp",
				Parent: gen.NewOptString(m.name), Root: gen.NewOptString(a.Path), Meta: meta,
			})
		}
	}
	return &gen.ModelsResponse{
		Models: []gen.ModelListing{{
			Name:         m.name,
			Model:        m.name,
			ModifiedAt:   "",
			Size:         "",
			Digest:       "",
			Type:         "model",
			Description:  "",
			Tags:         []string{""},
			Capabilities: []string{"completion"},
			Parameters:   "",
			Details: gen.ModelListingDetails{
				ParentModel:       "",
				Format:            "gguf",
				Family:            "",
				Families:          []string{""},
				ParameterSize:     "",
				QuantizationLevel: "",
			},
		}},
		Object: "list",
		Data:   data,
	}, nil
}

// ListModelsAlias implements GET /models, an alias of GET /v1/models.
func (s *Server) ListModelsAlias(ctx context.Context) (*gen.ModelsResponse, error) {
	return s.ListModels(ctx)
}

// ListModelsOllamaAlias implements GET /api/tags (ollama's path), an alias of GET /v1/models.
func (s *Server) ListModelsOllamaAlias(ctx context.Context) (*gen.ModelsResponse, error) {
	return s.ListModels(ctx)
}

// aliases are the names /v1/models lists for the model: the --alias list, else Alias alone.
func (s *Server) aliases() []string {
	if len(s.cfg.Aliases) > 0 {
		return s.cfg.Aliases
	}
	if s.cfg.Alias != "" {
		return []string{s.cfg.Alias}
	}
	return []string{}
}

// nonNilStrings makes a nil list encode as [].
func nonNilStrings(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}
