// Package validate checks what deploy/ gives an operator, with nothing but this machine: every
// YAML document under deploy/kubernetes is decoded strictly (an unknown or misspelt field is an
// error) into the real API types (k8s.io/api, sigs.k8s.io/gateway-api, the inference
// extension's InferencePool and EndpointPickerConfig, kustomize's Kustomization), KEDA's
// ScaledObject into the struct of keda.go, and the tests check the references between the
// objects, the Endpoint Picker's configuration, the model server's flags and deploy/Containerfile.
package validate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Doc is one YAML document of a manifest file, decoded into its API type.
type Doc struct {
	File       string // path relative to the directory loaded
	Index      int    // the document's place in its file, from 0
	APIVersion string
	Kind       string
	Name       string
	Obj        any // *appsv1.Deployment, *corev1.Service, ... (see NewObject)
}

func (d Doc) String() string {
	return fmt.Sprintf("%s[%d] %s %s", d.File, d.Index, d.Kind, d.Name)
}

// NewObject returns a new object of the Go type for apiVersion and kind, or an error for a kind
// this package does not know (which is then not checked, so it is refused).
func NewObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		return &corev1.Namespace{}, nil
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "v1 PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, nil
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "rbac.authorization.k8s.io/v1 Role":
		return &rbacv1.Role{}, nil
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		return &rbacv1.RoleBinding{}, nil
	case "inference.networking.k8s.io/v1 InferencePool":
		return &inferencev1.InferencePool{}, nil
	case "gateway.networking.k8s.io/v1 HTTPRoute":
		return &gatewayv1.HTTPRoute{}, nil
	case "gateway.networking.k8s.io/v1 Gateway":
		return &gatewayv1.Gateway{}, nil
	case "keda.sh/v1alpha1 ScaledObject":
		return &ScaledObject{}, nil
	case kustomizetypes.KustomizationVersion + " " + kustomizetypes.KustomizationKind:
		return &kustomizetypes.Kustomization{}, nil
	}
	return nil, fmt.Errorf("apiVersion %q kind %q is not a type this check knows (add it to NewObject)", apiVersion, kind)
}

// DecodeStrict decodes one YAML document into the type its apiVersion and kind name as the API
// server's strict field validation does (sigs.k8s.io/json: field names match case-sensitively):
// a field the type lacks, a field given twice or a value of the wrong type is an error.
func DecodeStrict(raw []byte) (Doc, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(raw, &head); err != nil {
		return Doc{}, err
	}
	if head.APIVersion == "" || head.Kind == "" {
		return Doc{}, errors.New("the document has no apiVersion or kind")
	}
	obj, err := NewObject(head.APIVersion, head.Kind)
	if err != nil {
		return Doc{}, err
	}
	if err := UnmarshalStrict(raw, obj); err != nil {
		return Doc{}, fmt.Errorf("%s %q: %w", head.Kind, head.Metadata.Name, err)
	}
	return Doc{APIVersion: head.APIVersion, Kind: head.Kind, Name: head.Metadata.Name, Obj: obj}, nil
}

// UnmarshalStrict decodes YAML into obj strictly: YAML with a key given twice is refused, and the
// JSON it converts to is decoded case-sensitively with unknown and duplicate fields as errors.
func UnmarshalStrict(raw []byte, obj any) error {
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// SplitDocuments splits a YAML stream at its "---" lines, leaving out documents that hold only
// comments or blanks.
func SplitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if hasContent(doc) {
			docs = append(docs, doc)
		}
	}
}

func hasContent(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") && line != "---" {
			return true
		}
	}
	return false
}

// LoadDir decodes every document of every .yaml or .yml file under dir, in path order; it
// returns the documents it could decode and an error for each it could not.
func LoadDir(dir string) ([]Doc, []error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, []error{err}
	}
	sort.Strings(files)
	var docs []Doc
	var errs []error
	for _, path := range files {
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		raws, err := SplitDocuments(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rel, err))
			continue
		}
		if len(raws) == 0 {
			errs = append(errs, fmt.Errorf("%s: no YAML document", rel))
		}
		for i, raw := range raws {
			doc, err := DecodeStrict(raw)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s[%d]: %w", rel, i, err))
				continue
			}
			doc.File, doc.Index = filepath.ToSlash(rel), i
			docs = append(docs, doc)
		}
	}
	return docs, errs
}
