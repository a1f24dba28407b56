package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// OpenAI narrates with an OpenAI-compatible chat-completions endpoint,
// streaming. Its text is presentation only.
type OpenAI struct {
	BaseURL string // e.g. http://127.0.0.1:11434/v1
	Model   string
	APIKey  string
	Timeout time.Duration // for a whole narration; default 20s
	HTTP    *http.Client
}

var _ Narrator = (*OpenAI)(nil)

const systemPrompt = "You narrate, in two or three short sentences, what a refund assistant is doing " +
	"for a customer. Only restate the facts given. Never promise an outcome; never say a refund " +
	"succeeded unless the facts say so. The customer and staff both read it: speak of \"the customer\" " +
	"and \"the order\", never \"you\" or \"your\". Speak the language the facts name (a BCP 47 tag; " +
	"English when none is named)."

// Narrate streams the model's answer to emit.
func (o *OpenAI) Narrate(ctx context.Context, f Facts, emit func(string) error) error {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	facts, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("agent: model facts: %w", err)
	}
	body, err := json.Marshal(map[string]any{
		"model":  o.Model,
		"stream": true,
		"messages": []map[string]string{
			{"role": "system", "content": systemPrompt},
			{"role": "user", "content": "Facts: " + string(facts)},
		},
	})
	if err != nil {
		return fmt.Errorf("agent: model request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(o.BaseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("agent: model request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	client := o.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("agent: model: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("agent: model answered %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			return nil
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return fmt.Errorf("agent: model sent a bad chunk: %w", err)
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != "" {
				if err := emit(c.Delta.Content); err != nil {
					return err
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("agent: model stream: %w", err)
	}
	return errors.New("agent: model stream ended without [DONE]")
}
