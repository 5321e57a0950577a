package links

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// toxiAPI speaks toxiproxy's HTTP API. It is used for the in-process server as
// well as an external one, so links behave the same whichever runs them.
//
// We do not use toxiproxy's own client package (v2.12.0): it takes no context,
// goes through http.DefaultClient without timeouts, and leaves response bodies
// unclosed on most calls, which leaks a connection per call in a run that
// toggles links thousands of times.
type toxiAPI struct {
	base string // "http://host:port"
	hc   *http.Client
}

// apiError is a non-2xx answer from the toxiproxy API.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("toxiproxy: HTTP %d: %s", e.Status, e.Message) }

// proxyJSON is a proxy as the API shows it.
type proxyJSON struct {
	Name     string  `json:"name"`
	Listen   string  `json:"listen"`
	Upstream string  `json:"upstream"`
	Enabled  bool    `json:"enabled"`
	Toxics   []Toxic `json:"toxics,omitempty"`
}

func newToxiAPI(endpoint string) (*toxiAPI, error) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("toxiproxy API address %q: not host:port or a URL", endpoint)
	}
	return &toxiAPI{
		base: strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/"),
		hc: &http.Client{
			Timeout: 30 * time.Second,
			Transport: &http.Transport{
				Proxy:               nil, // a loopback API must never go through HTTP_PROXY
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
				MaxIdleConnsPerHost: 16,
				IdleConnTimeout:     30 * time.Second,
			},
		},
	}, nil
}

func (a *toxiAPI) do(ctx context.Context, method, path string, in, out any, want ...int) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// toxiproxy refuses browsers by user agent; say who we are.
	req.Header.Set("User-Agent", "fencecheck")
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("toxiproxy %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("toxiproxy %s %s: %w", method, path, err)
	}
	ok := false
	for _, w := range want {
		ok = ok || resp.StatusCode == w
	}
	if !ok {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return fmt.Errorf("toxiproxy %s %s: %w", method, path, &apiError{Status: resp.StatusCode, Message: msg})
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("toxiproxy %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

func (a *toxiAPI) version(ctx context.Context) error {
	return a.do(ctx, http.MethodGet, "/version", nil, nil, http.StatusOK)
}

func (a *toxiAPI) createProxy(ctx context.Context, name, listen, upstream string) (proxyJSON, error) {
	var out proxyJSON
	err := a.do(ctx, http.MethodPost, "/proxies",
		proxyJSON{Name: name, Listen: listen, Upstream: upstream, Enabled: true}, &out, http.StatusCreated)
	return out, err
}

func (a *toxiAPI) setEnabled(ctx context.Context, name string, enabled bool) error {
	return a.do(ctx, http.MethodPost, "/proxies/"+url.PathEscape(name),
		map[string]bool{"enabled": enabled}, nil, http.StatusOK)
}

func (a *toxiAPI) getProxy(ctx context.Context, name string) (proxyJSON, error) {
	var out proxyJSON
	err := a.do(ctx, http.MethodGet, "/proxies/"+url.PathEscape(name), nil, &out, http.StatusOK)
	return out, err
}

func (a *toxiAPI) deleteProxy(ctx context.Context, name string) error {
	return a.do(ctx, http.MethodDelete, "/proxies/"+url.PathEscape(name), nil, nil, http.StatusNoContent)
}

func (a *toxiAPI) addToxic(ctx context.Context, proxy string, t Toxic) error {
	// toxiproxy answers 200 here, not 201.
	return a.do(ctx, http.MethodPost, "/proxies/"+url.PathEscape(proxy)+"/toxics", t, nil, http.StatusOK, http.StatusCreated)
}

func (a *toxiAPI) removeToxic(ctx context.Context, proxy, toxic string) error {
	return a.do(ctx, http.MethodDelete, "/proxies/"+url.PathEscape(proxy)+"/toxics/"+url.PathEscape(toxic), nil, nil, http.StatusNoContent)
}

func (a *toxiAPI) toxics(ctx context.Context, proxy string) ([]Toxic, error) {
	var out []Toxic
	err := a.do(ctx, http.MethodGet, "/proxies/"+url.PathEscape(proxy)+"/toxics", nil, &out, http.StatusOK)
	return out, err
}

func isStatus(err error, status int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == status
}

// inProcessToxiproxy is a toxiproxy server run as a library, its HTTP API served
// on a loopback port so the in-process and the external case share toxiAPI.
type inProcessToxiproxy struct {
	srv  *toxiproxy.ApiServer
	http *http.Server
	ln   net.Listener
	done chan struct{}
}

func startInProcessToxiproxy() (*inProcessToxiproxy, error) {
	// Metrics must not be nil; an empty container registers nothing.
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	// Some toxics (bandwidth, slicer) log through zerolog's global logger at trace level,
	// which no option of the server reaches; they would flood the harness's output.
	if zerolog.GlobalLevel() < zerolog.InfoLevel {
		zerolog.SetGlobalLevel(zerolog.InfoLevel)
	}
	// Listen binds a fixed address; we serve toxiproxy's own routes on a listener of ours
	// (a random loopback port).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("toxiproxy API listener: %w", err)
	}
	p := &inProcessToxiproxy{
		srv:  srv,
		http: &http.Server{Handler: srv.Routes(), ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(p.done)
		_ = p.http.Serve(ln) // returns on Close
	}()
	return p, nil
}

func (p *inProcessToxiproxy) addr() string { return p.ln.Addr().String() }

// close stops every proxy (closing their connections) and the API.
func (p *inProcessToxiproxy) close() {
	_ = p.srv.Collection.Clear()
	_ = p.http.Close()
	<-p.done
}
