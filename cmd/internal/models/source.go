package models

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
)

// DefaultEndpoint is the Hugging Face Hub; HF_ENDPOINT names a mirror.
const DefaultEndpoint = "https://huggingface.co"

// HF is how to reach Hugging Face: the endpoint hf: sources resolve
// against, and an access token for gated or private repositories, sent
// only to the endpoint's host (never to the CDN it redirects downloads to).
type HF struct {
	Endpoint string
	Token    string
}

// HFFromEnv reads HF_ENDPOINT and HF_TOKEN (HUGGING_FACE_HUB_TOKEN, the
// older name, too), the variables huggingface_hub and llama.cpp read.
func HFFromEnv() HF {
	hf := HF{Endpoint: os.Getenv("HF_ENDPOINT"), Token: os.Getenv("HF_TOKEN")}
	if hf.Token == "" {
		hf.Token = os.Getenv("HUGGING_FACE_HUB_TOKEN")
	}
	return hf
}

func (hf HF) endpoint() (*url.URL, error) {
	e := strings.TrimRight(hf.Endpoint, "/")
	if e == "" {
		e = DefaultEndpoint
	}
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("HF_ENDPOINT %q is not an http(s) URL", hf.Endpoint)
	}
	return u, nil
}

// Source is where a pull downloads from.
type Source struct {
	URL      string // the URL fetched
	File     string // its file name, which gives the default model name
	Repo     string // OWNER/REPO of a Hugging Face source, else ""
	Revision string // its branch, tag or commit
	hfHost   string // scheme://host of the Hugging Face endpoint, which alone gets the token
}

var repoPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ParseSource parses what geist pull takes:
//
//	hf:OWNER/REPO/FILE.gguf           a file of a Hugging Face repository (branch main)
//	hf:OWNER/REPO@REVISION/FILE.gguf  the same at a branch, tag or commit
//	https://HOST/PATH/FILE.gguf       any URL (a Hugging Face .../blob/... page URL
//	                                  is turned into its download URL)
func ParseSource(src string, hf HF) (Source, error) {
	ep, err := hf.endpoint()
	if err != nil {
		return Source{}, err
	}
	s := Source{hfHost: ep.Scheme + "://" + ep.Host}
	if rest, ok := strings.CutPrefix(src, "hf:"); ok {
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) < 3 || parts[2] == "" {
			return Source{}, fmt.Errorf("%q names no file: want hf:OWNER/REPO/FILE.gguf (the repository's file list names the .gguf files)", src)
		}
		owner, repo, file := parts[0], parts[1], parts[2]
		repo, rev, _ := strings.Cut(repo, "@")
		if rev == "" {
			rev = "main"
		}
		if !repoPart.MatchString(owner) || !repoPart.MatchString(repo) {
			return Source{}, fmt.Errorf("%q: OWNER/REPO %q is not a Hugging Face repository name", src, owner+"/"+repo)
		}
		if !strings.HasSuffix(file, Ext) || strings.Contains(file, "..") || strings.HasPrefix(file, "/") {
			return Source{}, fmt.Errorf("%q: the file %q is not a .gguf file of the repository", src, file)
		}
		var p strings.Builder
		for _, seg := range strings.Split(file, "/") {
			p.WriteString("/" + url.PathEscape(seg))
		}
		base := strings.TrimRight(ep.String(), "/")
		s.URL = base + "/" + owner + "/" + repo + "/resolve/" + url.PathEscape(rev) + p.String()
		s.File, s.Repo, s.Revision = path.Base(file), owner+"/"+repo, rev
		return s, nil
	}
	u, err := url.Parse(src)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return Source{}, fmt.Errorf("%q is neither an http(s) URL nor hf:OWNER/REPO/FILE.gguf", src)
	}
	// A Hugging Face page URL (.../blob/REV/FILE) downloads from .../resolve/REV/FILE.
	if u.Scheme+"://"+u.Host == s.hfHost {
		seg := strings.SplitN(strings.TrimPrefix(u.Path, "/"), "/", 5)
		if len(seg) == 5 && (seg[2] == "blob" || seg[2] == "resolve") {
			seg[2] = "resolve"
			u.Path = "/" + strings.Join(seg, "/")
			u.RawPath = ""
			s.Repo, s.Revision = seg[0]+"/"+seg[1], seg[3]
		}
	}
	s.URL = u.String()
	s.File = path.Base(u.Path)
	return s, nil
}

// DefaultName is the model name a source is stored under without --name:
// its file name without .gguf.
func (s Source) DefaultName() (string, error) {
	n, err := CheckName(s.File)
	if err != nil {
		return "", fmt.Errorf("cannot name the model after the file %q (give a name with --name): %w", s.File, err)
	}
	return n, nil
}

// ResolveSource parses what geist pull and /api/pull take: a catalog name
// (qwen2.5:0.5b, qwen3:1.7b-q8_0, llama3.2), whose entry it returns too,
// or a source ParseSource takes. A FAMILY:TAG name the catalog does not
// have fails with the close matches (an *UnknownCatalogError).
func ResolveSource(src string, hf HF) (Source, CatalogEntry, error) {
	if e, ok := LookupCatalog(src); ok {
		s, err := ParseSource(e.Source, hf)
		return s, e, err
	}
	if IsCatalogName(src) {
		_, err := resolveCatalog(src)
		return Source{}, CatalogEntry{}, err
	}
	s, err := ParseSource(src, hf)
	if err != nil && !strings.ContainsAny(src, ":/") {
		// A bare word: most likely a mistyped catalog family.
		if sim := Similar(src, catalogNames(), 3); len(sim) > 0 {
			return Source{}, CatalogEntry{}, &UnknownCatalogError{Name: src, Similar: sim}
		}
		return Source{}, CatalogEntry{}, fmt.Errorf("%q is neither a catalog name (geist models catalog lists them), hf:OWNER/REPO/FILE.gguf nor an http(s) URL", src)
	}
	return s, CatalogEntry{}, err
}
