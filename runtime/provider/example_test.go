package provider_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/shard-dev/shard/protocol"
	"github.com/shard-dev/shard/runtime/provider"
)

// A local OpenAI-compatible server (here a stand-in for llama.cpp, vLLM or
// Ollama) is reached by base URL; the answer is read event by event.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, data := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"qwen","choices":[{"index":0,"delta":{"content":"Hello"}}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"qwen","choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", data)
		}
	}))
	defer srv.Close()

	p, err := provider.New(provider.Config{
		Name:       provider.NameOpenAI,
		BaseURL:    srv.URL + "/v1",
		Model:      "qwen",
		HTTPClient: srv.Client(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := p.Stream(context.Background(), provider.Request{Messages: []protocol.Message{
		{ID: "m1", Role: "user", Content: []protocol.ContentBlock{{Type: "text", Text: "Say hello."}}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(protocol.CodeOf(err), err)
			return
		}
		switch ev.Kind {
		case provider.EventText:
			fmt.Printf("text %d %q\n", ev.Index, ev.Text)
		case provider.EventStop:
			fmt.Println("stop", ev.StopReason)
		}
	}
	// Output:
	// text 0 "Hello"
	// text 0 "!"
	// stop end_turn
}
