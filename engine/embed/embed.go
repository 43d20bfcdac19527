// Package embed computes text embeddings with an embedding model (bert,
// nomic-bert, Qwen3-Embedding, EmbeddingGemma; see model.Encoder): it
// tokenizes the texts as llama.cpp does, bounds and truncates them,
// runs them through the model in batches and returns L2-normalized
// vectors, optionally shortened (Matryoshka dimensions).
//
// A text's vector does not depend on the texts embedded with it: every
// kernel is batch-invariant, so it is bit for bit the vector the text gets
// alone.
package embed

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/tokenizer"
)

// Options bound what one Embed call may cost; zero values take the
// defaults noted.
type Options struct {
	// Ctx is the most tokens of one input (its specials included): longer
	// inputs are truncated or refused. 0: the model's context, at most
	// 4096 (as Ollama's default num_ctx).
	Ctx int
	// MaxInputs bounds the inputs of one call (2048).
	MaxInputs int
	// MaxTokens bounds the tokens of one call, after truncation (65536).
	MaxTokens int
	// BatchTokens is the most tokens run together in one pass (512; a
	// longer input runs alone).
	BatchTokens int
	// Threads bounds the goroutines of a matrix product (0: GOMAXPROCS).
	Threads int
}

func (o *Options) defaults(ctxTrain int) {
	if o.Ctx <= 0 {
		o.Ctx = min(ctxTrain, 4096)
	}
	o.Ctx = min(o.Ctx, ctxTrain)
	if o.MaxInputs <= 0 {
		o.MaxInputs = 2048
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 65536
	}
	if o.BatchTokens <= 0 {
		o.BatchTokens = 512
	}
}

// Errors of bad requests: the HTTP front ends answer them with 400.
var (
	// ErrInput marks an input that cannot be embedded: empty, too many,
	// too long without truncation, a token outside the vocabulary, a
	// dimension out of range.
	ErrInput = errors.New("embed: bad input")
)

// inputError is an ErrInput with its message.
type inputError struct{ msg string }

func (e *inputError) Error() string        { return e.msg }
func (e *inputError) Is(target error) bool { return target == ErrInput }

func badInput(format string, a ...any) error { return &inputError{fmt.Sprintf(format, a...)} }

// Model is an embedding model opened for use. It is safe for concurrent
// use.
type Model struct {
	path string
	file *gguf.File
	enc  *model.Encoder
	tok  *tokenizer.Tokenizer
	opt  Options
	pre  []int32 // specials before each input ([CLS], BOS)
	post []int32 // and after ([SEP], EOS)
}

// Open maps the GGUF file at path and loads its embedding model. It fails
// with a clear error for a model that does not embed.
func Open(path string, o Options) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("embedding model %s: no such file", path)
		}
		return nil, fmt.Errorf("embedding model %s: %w", path, err)
	}
	m, err := New(f, o)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("embedding model %s: %w", path, err)
	}
	m.path = path
	return m, nil
}

// New loads the embedding model of an open file; Close closes f.
func New(f *gguf.File, o Options) (*Model, error) {
	enc, err := model.LoadEncoder(f)
	if err != nil {
		return nil, err
	}
	v, err := tokenizer.VocabFromMetadata(f.Value)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		return nil, err
	}
	if tok.NTokens() > enc.NVocab {
		return nil, fmt.Errorf("the tokenizer has %d tokens but the model only %d embeddings", tok.NTokens(), enc.NVocab)
	}
	o.defaults(enc.CtxTrain)
	enc.Threads = o.Threads
	m := &Model{file: f, enc: enc, tok: tok, opt: o}
	m.pre, m.post = tok.Around()
	if len(m.pre)+len(m.post) >= o.Ctx {
		return nil, fmt.Errorf("a context of %d tokens leaves no room for text", o.Ctx)
	}
	return m, nil
}

// Close releases the model's file.
func (m *Model) Close() error { return m.file.Close() }

// Dim is the length of the model's vectors.
func (m *Model) Dim() int { return m.enc.Dim }

// Ctx is the most tokens of one input.
func (m *Model) Ctx() int { return m.opt.Ctx }

// Arch is the model's architecture (general.architecture).
func (m *Model) Arch() string { return m.enc.Arch }

// Pooling is how the model pools its token states.
func (m *Model) Pooling() model.Pooling { return m.enc.Pooling }

// Tokenizer is the model's tokenizer.
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// Encoder is the model's network.
func (m *Model) Encoder() *model.Encoder { return m.enc }

// File is the model's GGUF file.
func (m *Model) File() *gguf.File { return m.file }

// Input is one text to embed, or (Tokens non-nil) a sequence of the
// model's token ids taken as it is (no specials added).
type Input struct {
	Text   string
	Tokens []int32
}

// Request is one embedding call.
type Request struct {
	Inputs []Input
	// Truncate cuts an input longer than the context to fit (keeping its
	// specials); false refuses it (ErrInput).
	Truncate bool
	// Dimensions, if positive, shortens each vector to its first
	// Dimensions values, normalized again (Matryoshka models). It must
	// not exceed Dim.
	Dimensions int
}

// Result holds one vector per input, in order, and the tokens embedded.
type Result struct {
	Embeddings [][]float32
	Tokens     int
}

// Texts is a Request of plain texts.
func Texts(texts []string, truncate bool) Request {
	r := Request{Truncate: truncate, Inputs: make([]Input, len(texts))}
	for i, t := range texts {
		r.Inputs[i].Text = t
	}
	return r
}

// Tokenize returns the tokens of text as the model embeds it (specials
// added, truncated to the context when truncate is set), and whether it
// was cut.
func (m *Model) Tokenize(text string, truncate bool) ([]int32, bool, error) {
	body := m.tok.Encode(text, false, true)
	room := m.opt.Ctx - len(m.pre) - len(m.post)
	cut := false
	if len(body) > room {
		if !truncate {
			return nil, false, badInput("the input has %d tokens, more than the context of %d (truncate is off)", len(body)+len(m.pre)+len(m.post), m.opt.Ctx)
		}
		body, cut = body[:room], true
	}
	out := make([]int32, 0, len(m.pre)+len(body)+len(m.post))
	out = append(out, m.pre...)
	out = append(out, body...)
	return append(out, m.post...), cut, nil
}

// Embed tokenizes and checks every input first (count, lengths, total
// tokens), then embeds them in batches of at most BatchTokens tokens,
// stopping when ctx ends.
func (m *Model) Embed(ctx context.Context, r Request) (Result, error) {
	n := len(r.Inputs)
	switch {
	case n == 0:
		return Result{}, badInput("no input to embed")
	case n > m.opt.MaxInputs:
		return Result{}, badInput("%d inputs, more than the %d one request may have", n, m.opt.MaxInputs)
	case r.Dimensions < 0:
		return Result{}, badInput("dimensions %d must be positive", r.Dimensions)
	case r.Dimensions > m.enc.Dim:
		return Result{}, badInput("dimensions %d: the model's vectors have %d", r.Dimensions, m.enc.Dim)
	}
	seqs := make([][]int32, n)
	total := 0
	for i, in := range r.Inputs {
		var s []int32
		if in.Tokens != nil {
			s = in.Tokens
			if len(s) == 0 {
				return Result{}, badInput("input %d is an empty token list", i)
			}
			for _, t := range s {
				if t < 0 || int(t) >= m.enc.NVocab {
					return Result{}, badInput("input %d: token %d is outside the model's vocabulary of %d", i, t, m.enc.NVocab)
				}
			}
			if len(s) > m.opt.Ctx {
				if !r.Truncate {
					return Result{}, badInput("input %d has %d tokens, more than the context of %d (truncate is off)", i, len(s), m.opt.Ctx)
				}
				s = s[:m.opt.Ctx]
			}
		} else {
			var err error
			if s, _, err = m.Tokenize(in.Text, r.Truncate); err != nil {
				if n > 1 {
					return Result{}, badInput("input %d: %v", i, err)
				}
				return Result{}, err
			}
			if len(s) == 0 {
				return Result{}, badInput("input %d is empty and the model adds no tokens around it", i)
			}
		}
		total += len(s)
		if total > m.opt.MaxTokens {
			return Result{}, badInput("the inputs have more than %d tokens, the most one request may have", m.opt.MaxTokens)
		}
		seqs[i] = s
	}
	res := Result{Embeddings: make([][]float32, n), Tokens: total}
	for i := range res.Embeddings {
		res.Embeddings[i] = make([]float32, m.enc.Dim)
	}
	for lo := 0; lo < n; {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		hi, tokens := lo+1, len(seqs[lo])
		for hi < n && tokens+len(seqs[hi]) <= m.opt.BatchTokens {
			tokens += len(seqs[hi])
			hi++
		}
		if err := m.enc.Embed(ctx, seqs[lo:hi], res.Embeddings[lo:hi]); err != nil {
			return Result{}, err
		}
		lo = hi
	}
	if d := r.Dimensions; d > 0 && d < m.enc.Dim {
		for i, v := range res.Embeddings {
			v = v[:d:d]
			model.Normalize(v)
			res.Embeddings[i] = v
		}
	}
	return res, nil
}
