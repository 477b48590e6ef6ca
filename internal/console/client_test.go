package console_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// browser is an HTTP client that behaves like a person's browser on the
// console: it keeps cookies, follows redirects, sends the fetch metadata a
// browser sends for a same-origin form, and submits forms as the page
// renders them (action, hidden fields, the pressed button).
type browser struct {
	t      *testing.T
	base   string
	client *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: base, client: &http.Client{Jar: jar}}
}

// response is a page as fetched.
type response struct {
	Status int
	URL    *url.URL
	Body   string
	Header http.Header
	doc    *html.Node
}

func (b *browser) do(req *http.Request) response {
	b.t.Helper()
	res, err := b.client.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	doc, err := html.Parse(strings.NewReader(string(body)))
	require.NoError(b.t, err)
	return response{Status: res.StatusCode, URL: res.Request.URL, Body: string(body), Header: res.Header, doc: doc}
}

// get opens a path of the console, or an absolute URL (a link from a mail).
func (b *browser) get(target string) response {
	b.t.Helper()
	if strings.HasPrefix(target, "/") {
		target = b.base + target
	}
	req, err := http.NewRequest(http.MethodGet, target, nil)
	require.NoError(b.t, err)
	req.Header.Set("Sec-Fetch-Site", "none")
	return b.do(req)
}

// post sends fields to a path as a form on one of our pages would; site
// is the Sec-Fetch-Site the browser reports ("same-origin" for our forms).
func (b *browser) post(path string, fields url.Values, site string) response {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(fields.Encode()))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", site)
	if site == "same-origin" {
		req.Header.Set("Origin", b.base)
	}
	return b.do(req)
}

// form is one <form> of a page.
type form struct {
	Action, Method string
	Fields         url.Values
	// Buttons are the submit buttons: text → name=value.
	Buttons map[string][2]string
	// Text is the text of the element holding the form (its table row, or
	// the form itself), to pick the form about one reminder.
	Text string
	// Inputs are the names of the text fields a person can fill.
	Inputs []string
}

// forms returns the page's forms, in order.
func (r response) forms() []form {
	var out []form
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "form" {
			f := form{Action: attr(n, "action"), Method: strings.ToUpper(attr(n, "method")), Fields: url.Values{}, Buttons: map[string][2]string{}}
			holder := n
			for p := n.Parent; p != nil; p = p.Parent {
				if p.Type == html.ElementNode && p.Data == "tr" {
					holder = p
					break
				}
			}
			f.Text = text(holder) + " " + attrs(holder)
			var fields func(n *html.Node)
			fields = func(n *html.Node) {
				if n.Type == html.ElementNode {
					switch n.Data {
					case "input":
						name := attr(n, "name")
						if name == "" {
							break
						}
						f.Fields.Set(name, attr(n, "value"))
						if typ := attr(n, "type"); typ == "" || typ == "text" || typ == "password" {
							f.Inputs = append(f.Inputs, name)
						}
					case "textarea":
						f.Fields.Set(attr(n, "name"), text(n))
						f.Inputs = append(f.Inputs, attr(n, "name"))
					case "button":
						if attr(n, "type") == "" || attr(n, "type") == "submit" {
							f.Buttons[strings.TrimSpace(text(n))] = [2]string{attr(n, "name"), attr(n, "value")}
						}
					}
				}
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					fields(c)
				}
			}
			fields(n)
			out = append(out, f)
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(r.doc)
	return out
}

// formFor returns the only POST form whose holder mentions what.
func (r response) formFor(t *testing.T, what string) form {
	t.Helper()
	var found []form
	for _, f := range r.forms() {
		if f.Method == "POST" && strings.Contains(f.Text, what) {
			found = append(found, f)
		}
	}
	require.Len(t, found, 1, "forms about %q on %s:\n%s", what, r.URL, r.Body)
	return found[0]
}

// submit presses the button labelled button, with the person's input in
// filled (only fields the form has), as the browser would send it.
func (b *browser) submit(f form, button string, filled map[string]string, site string) response {
	b.t.Helper()
	fields := url.Values{}
	for k, v := range f.Fields {
		fields[k] = append([]string(nil), v...)
	}
	for k, v := range filled {
		require.Contains(b.t, f.Inputs, k, "the form has no field %s", k)
		fields.Set(k, v)
	}
	nv, ok := f.Buttons[button]
	require.True(b.t, ok, "no button %q in %v", button, f.Buttons)
	if nv[0] != "" {
		fields.Set(nv[0], nv[1])
	}
	require.Equal(b.t, "POST", f.Method)
	require.True(b.t, strings.HasPrefix(f.Action, "/"), "the form posts to the console itself: %s", f.Action)
	return b.post(f.Action, fields, site)
}

// rows returns the text of each cell of each row of the table with class.
func (r response) rows(class string) [][]string {
	var out [][]string
	var walk func(n *html.Node, in bool)
	walk = func(n *html.Node, in bool) {
		if n.Type == html.ElementNode && n.Data == "table" && strings.Contains(" "+attr(n, "class")+" ", " "+class+" ") {
			in = true
		}
		if in && n.Type == html.ElementNode && n.Data == "tr" {
			var cells []string
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode && c.Data == "td" {
					cells = append(cells, strings.Join(strings.Fields(text(c)), " "))
				}
			}
			if len(cells) > 0 {
				out = append(out, cells)
			}
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, in)
		}
	}
	walk(r.doc, false)
	return out
}

// Text is the page's visible text, whitespace collapsed.
func (r response) Text() string { return strings.Join(strings.Fields(text(r.doc)), " ") }

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func attrs(n *html.Node) string {
	var s []string
	for _, a := range n.Attr {
		s = append(s, a.Key+"="+a.Val)
	}
	return strings.Join(s, " ")
}

func text(n *html.Node) string {
	var sb strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			sb.WriteString(n.Data)
			sb.WriteString(" ")
		}
		if n.Type == html.ElementNode && (n.Data == "style" || n.Data == "script" || n.Data == "head") {
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return sb.String()
}

// linkTo returns the href of the only link whose text or label is
// exactly text.
func (r response) linkTo(t *testing.T, label string) string {
	t.Helper()
	var found []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "a" {
			if strings.Join(strings.Fields(text(n)), " ") == label || attr(n, "aria-label") == label {
				found = append(found, attr(n, "href"))
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(r.doc)
	require.Len(t, found, 1, "links %q on %s:\n%s", label, r.URL, r.Body)
	return found[0]
}
